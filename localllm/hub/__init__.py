"""Model management: where models live, resolving a `--model` reference, pulling from the
Hugging Face Hub, describing (`list`, `info`) and removing models.

| module | what it is |
| --- | --- |
| `locations.py` | the folders of each tool (HF cache, LM Studio, llama.cpp, Ollama, ours) |
| `names.py` | file-name conventions: quant labels, split shards, projector files (pure) |
| `refs.py` | parsing `owner/repo[:QUANT]`, `owner/repo/FILE.gguf` (pure) |
| `select.py` | which files of a repo to fetch for a reference (pure) |
| `discovery.py` | models already on disk (GGUF files, HF folders) |
| `summary.py` | architecture / quantization / size / context of one found model |
| `pull.py` | downloads through `huggingface_hub`, then hash checks (`verify.py`) |
| `failures.py` | huggingface_hub / network exceptions -> one-line user errors |
| `resolve.py` | a `--model` reference -> a local path (path, list name, repo id) |
| `remove.py` | deleting pulled models from the HF cache or our folder |
| `info.py` | `localllm info`: metadata, tensor types, memory needed, GPU fit |

Nothing is imported here, so `import localllm.hub.resolve` stays light (no torch).
"""
