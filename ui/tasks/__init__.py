"""The Tasks view: a workspace's dependency graph."""
