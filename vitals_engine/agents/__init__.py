"""Agents: `react()`, which acts with tools until it submits an answer, and the tools it
acts with in a sample's sandbox: `bash()`, `python()`, `text_editor()`, and `sandbox()`
for tools and scorers of one's own."""
