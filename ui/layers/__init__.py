"""The Layers view: the social graph, procedural patterns and the spatial scatter."""
