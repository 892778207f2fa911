"""isogclr: a reproducible replication of iSogCLR, SogCLR and EMC2."""

__version__ = "0.1.0"
