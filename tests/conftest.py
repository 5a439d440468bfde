"""Suite-wide test set-up."""
import os

# Tests never touch the network: a hub id must fail fast instead of downloading.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
