"""Model file formats: GGUF reading/writing glue, quant block layouts and dequantization."""
