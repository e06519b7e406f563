"""N-gram (prompt-lookup) speculative decoding: proposer, policy, acceptance."""
