"""heads.export: runs to TransformerLens, torch and npz (export) and to GGUF for llama.cpp (gguf).

May import: core, read
"""
