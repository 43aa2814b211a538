"""Model providers behind one Provider protocol (base.py). SDKs are imported lazily by their module only."""
