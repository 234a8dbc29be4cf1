"""The console's pages, one module each; every module exposes ``routes``."""
