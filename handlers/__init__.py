"""Lambda entry points and the example jobs that the demo and the stack use."""
