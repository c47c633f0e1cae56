"""Start vLLM or SGLang for a model profile, wait until it is healthy, and always stop it.

``plan``: the command line, environment and files for one start (``vlmocr serve --print`` shows
them); ``process``: the started server (health, identity, stopping its process group);
``running``: ``running_server`` and ``vlmocr run --serve``; ``hfjobs``: the same server as a
Hugging Face job (its image, flavor and command); ``hfjob_launch``: that job launched through
huggingface_hub's Jobs API, followed until ready and cancelled.

Everything model-specific comes from the profile (`[serve.vllm]` / `[serve.sglang]`: flags,
environment, JSON-valued flags); everything cluster-specific is decided here, once:

* **Offline.** ``HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1``: compute nodes have no internet, and a
  server that tries to reach the Hub hangs or fails late. Fetch models beforehand.
* **Private caches.** vLLM, Triton, Inductor, FlashInfer, torch extensions, the CUDA JIT cache,
  ``XDG_CACHE_HOME`` and the Transformers remote-code modules all go to a fresh directory under
  ``$TMPDIR`` for this one server, so a cache left in a shared home by another job, user or
  version cannot break start-up, and two servers on one node never race on one cache. The cache
  directory is removed when the server stops. ``HF_HOME`` is pinned to where it was before
  (moving ``XDG_CACHE_HOME`` would otherwise move the model cache too).
* **No FlashInfer sampler** (``VLLM_USE_FLASHINFER_SAMPLER=0``): it JIT-compiles with ``nvcc``
  at start-up, and nodes without a CUDA toolkit crash there.
* **JSON-valued flags** (profile ``json_args``, e.g. ``--limit-mm-per-prompt``) are written to a
  YAML args file passed with ``--config FILE`` (both vLLM and SGLang read one), each value a
  JSON string — never shell-quoted, and read the same way by vLLM versions that pass nested
  YAML mappings through ``json.dumps`` and older ones that pass values through ``str``.
* **Port.** Asked from the OS (bind port 0) unless ``--port``; a given port that is taken is an
  error before anything starts. After ``/health`` answers, the answering server must be ours:
  the listening socket belongs to our server's process group (Linux ``/proc``), the process is
  alive, and ``/v1/models`` lists the name we gave it.
* **Tensor parallelism** = the number of entries in ``CUDA_VISIBLE_DEVICES`` (what SLURM gave
  this job), not what ``nvidia-smi`` lists (every GPU of the node; every MIG slice).
* **Stopping.** The server runs in its own session (process group); it is stopped with SIGTERM
  to the whole group, then SIGKILL after a grace period — on normal exit, on an exception, on
  SIGTERM/SIGINT of vlmocr, and (Linux) by the kernel if vlmocr itself is killed outright.

The executable is ``vllm serve`` when ``vllm`` is on PATH, else ``python -m
vllm.entrypoints.openai.api_server --model …`` when this interpreter can import vllm; SGLang is
``python -m sglang.launch_server``. ``VLMOCR_VLLM_BIN`` / ``VLMOCR_SGLANG_BIN`` (a command line,
shell-split) replace them; an override of the vLLM binary is called like the ``vllm`` CLI
(``BIN serve MODEL …``).
"""

