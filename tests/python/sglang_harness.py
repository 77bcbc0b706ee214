"""Stand-ins for what SGLang hands a HiCache storage backend (tests and bench/sglang_backend.py):
its storage config, host KV pools with SGLang's buffer shapes and page pointers (MHA and MLA,
layer_first and page_first; MHA with K and V of different head dims as two buffers), and its
chained per-page keys. tests/engines/test_sglang_*.py run the same backend under SGLang 0.5.23's
own classes; where these stand-ins and SGLang differ, SGLang is right."""

import dataclasses
import hashlib

import torch

PAGE = 4  # tokens per page (the tests' default)
LAYERS = 3


@dataclasses.dataclass
class StorageConfig:  # SGLang 0.5.23's HiCacheStorageConfig, with defaults
    tp_rank: int = 0
    tp_size: int = 1
    pp_rank: int = 0
    pp_size: int = 1
    attn_cp_rank: int = 0
    attn_cp_size: int = 1
    is_mla_model: bool = False
    enable_storage_metrics: bool = False
    is_page_first_layout: bool = False
    model_name: str = "test-model"
    tp_lcm_size: int = None
    should_split_heads: bool = False
    dp_rank: int = 0
    extra_config: dict = None
    dcp_size: int = 1
    dcp_rank: int = 0
    logical_page_size: int = None


@dataclasses.dataclass
class PoolTransfer:  # SGLang's PoolTransfer fields the backend reads (hit_policy by value)
    name: str
    host_indices: torch.Tensor = None
    keys: list = None
    hit_policy: str = "all_pages"


class HostPool:
    """A host KV pool with SGLang's buffer shapes and page pointers. With `v_head_dim` (MHA,
    page_first) K and V are two buffers of different widths and kv_buffer is their tuple, as in
    SGLang's AsymmetricMHATokenToKVPoolHost."""

    def __init__(self, layout, mla, pages=16, heads=2, head_dim=8, dim=12, seed=0, page=PAGE,
                 layers=LAYERS, v_head_dim=None):
        self.layout, self.mla, self.page_size, self.layers = layout, mla, page, layers
        self.layer_num, self.dtype = layers, torch.bfloat16
        self.size = pages * page
        gen = torch.Generator().manual_seed(seed)

        def values(shape):
            return torch.randint(-1000, 1000, shape, generator=gen).to(torch.bfloat16)

        self.split = v_head_dim is not None
        if self.split:
            assert layout == "page_first" and not mla
            self.kv_buffer = (values((self.size, layers, heads, head_dim)),
                              values((self.size, layers, heads, v_head_dim)))
            self.token_elems = (heads * head_dim, heads * v_head_dim)
            return
        if mla:
            shape = ((layers, self.size, 1, dim) if layout == "layer_first"
                     else (self.size, layers, 1, dim))
        else:
            shape = ((2, layers, self.size, heads, head_dim) if layout == "layer_first"
                     else (2, self.size, layers, heads, head_dim))
        self.kv_buffer = values(shape)
        self.token_elems = (dim if mla else heads * head_dim)  # per layer, per K or V

    def get_page_buffer_meta(self, indices):
        if self.split:
            ptrs, sizes = [], []
            for first in indices[::self.page_size].tolist():
                for buf, elems in zip(self.kv_buffer, self.token_elems):
                    per_tok = elems * buf.element_size()
                    ptrs.append(buf.data_ptr() + first * self.layers * per_tok)
                    sizes.append(self.layers * self.page_size * per_tok)
            return ptrs, sizes
        it = self.kv_buffer.element_size()
        base, per_tok = self.kv_buffer.data_ptr(), self.token_elems * it
        v_offset = 0 if self.mla else self.kv_buffer.numel() * it // 2
        ptrs, sizes = [], []
        for first in indices[::self.page_size].tolist():
            if self.layout == "layer_first":
                for layer in range(self.layers):
                    k = base + first * per_tok + layer * self.size * per_tok
                    ptrs += [k] if self.mla else [k, k + v_offset]
                    sizes += [self.page_size * per_tok] * (1 if self.mla else 2)
            else:
                k = base + first * self.layers * per_tok
                ptrs += [k] if self.mla else [k, k + v_offset]
                sizes += [self.layers * self.page_size * per_tok] * (1 if self.mla else 2)
        return ptrs, sizes

    def token_view(self, index):
        """Every byte of one token slot (all layers, K and V)."""
        if self.split:
            return torch.cat([b[index].flatten() for b in self.kv_buffer])
        if self.mla:
            return (self.kv_buffer[:, index] if self.layout == "layer_first"
                    else self.kv_buffer[index])
        return (self.kv_buffer[:, :, index] if self.layout == "layer_first"
                else self.kv_buffer[:, index])

    def _page(self, index):
        if self.mla:
            return (self.kv_buffer[:, index:index + self.page_size] if self.layout == "layer_first"
                    else self.kv_buffer[index:index + self.page_size])
        return (self.kv_buffer[:, :, index:index + self.page_size] if self.layout == "layer_first"
                else self.kv_buffer[:, index:index + self.page_size])

    def get_data_page(self, index, flat=True):
        page = self._page(index)
        return page.flatten() if flat else page

    def get_dummy_flat_data_page(self):
        return torch.zeros_like(self.get_data_page(0))

    def set_from_flat_data_page(self, index, data_page):
        page = self._page(index)
        page.copy_(data_page.reshape(page.shape))


def page_hashes(tokens, page=PAGE):
    """SGLang's chained per-page keys: sha256 of the prior hash and the page's u32 tokens."""
    keys, prior = [], None
    for i in range(0, len(tokens) - len(tokens) % page, page):
        h = hashlib.sha256()
        if prior:
            h.update(bytes.fromhex(prior))
        for t in tokens[i:i + page]:
            h.update(int(t).to_bytes(4, "little"))
        prior = h.hexdigest()
        keys.append(prior)
    return keys


def slots(pages, page=PAGE):
    """The token slots of these pages, as SGLang's host_indices."""
    return torch.tensor([p * page + t for p in pages for t in range(page)], dtype=torch.int64)
