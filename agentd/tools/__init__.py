"""Tools the model can call: base protocol, registry, workspace containment, fs, shell, todo."""
