"""Model forward code per architecture, chosen through one registry (registry.ARCHS)."""
