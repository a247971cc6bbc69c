"""`Task`, the user's entry point, and what one run of it needs: its options, resuming an
unfinished run, moving the chats of big runs to the log, and streaming samples out."""
