"""Process-wide services the views and consumers share."""
