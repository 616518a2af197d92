"""What every view shares: the session, task runner, wording, themes, icons, dialogs."""
