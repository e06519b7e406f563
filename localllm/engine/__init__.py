"""The engine: LLMEngine (engine.py) and its thread (async_engine.py), the scheduler and block
manager (pure Python), the model runner and its CUDA graphs, the KV pool and the sampler.

Import from the modules (`localllm.engine.engine.LLMEngine`): this package imports nothing, so
the pure-Python scheduler and block manager stay free of torch."""
