"""``python -m jobframework.cli``: how ``jf worker`` starts its child worker processes."""

from jobframework.cli import main

if __name__ == "__main__":
    main()
