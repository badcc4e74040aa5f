"""Conformance cases of the generic path on hierarchical and hybrid vision models (docs/math.md#x, #layers):
every attention layer in call order across stages and branches, X and X_l in their layouts (NHWC, NCHW, folded
windows, unfolded patches), non-square P (spatial reduction, pooling, class and cross attention, subsampled
or global queries) with V from the tokens the module really attends to.

timm models: tests/vision_timm.py and tests/vision_hybrid.py (P recomputed in float64 with the family's
bias, mask and pooling). HF vision towers: P against output_attentions, X and X_l against hidden_states.
"""

from __future__ import annotations

from functools import partial

from tests import vision_hf as hf
from tests import vision_hybrid as vh
from tests import vision_timm as vt
from tests.cases_timm_functional import cait, cait_layers, cait_sites
from tests.families import Case, images

CASES: dict[str, dict[str, Case]] = {
    "generic": {
        "swinv2": Case(vh.swinv2, images, vh.swinv2_sites, vt.hooked(vh.swinv2_points)),
        "pvt_v2": Case(vt.pvt_v2, images, vt.pvt_sites, vt.hooked(vt.pvt_points)),
        "twins": Case(vt.twins, images, vt.twins_sites, vt.hooked(vt.twins_points)),
        "mvitv2": Case(vt.mvit, images, vt.mvit_sites, vt.hooked(vt.mvit_points)),
        "hiera": Case(
            vt.hiera,
            partial(images, 64),
            lambda m: [vt.hiera_site(b.attn) for b in m.blocks],
            vt.hooked(vt.hiera_points),
        ),
        "maxvit": Case(vt.maxvit, images, vt.maxvit_sites, vt.hooked(vt.maxvit_points)),
        "levit": Case(vh.levit, partial(images, 64), vh.levit_sites, vt.hooked(vh.levit_points)),
        "efficientformer": Case(
            vh.efficientformer,
            partial(images, 224),
            vh.efficientformer_sites,
            vt.hooked(vh.efficientformer_points),
        ),
        "coat": Case(vh.coat, images, vh.coat_sites, vt.hooked(vh.coat_points), observable=False),
        "crossvit": Case(vh.crossvit, images, vh.crossvit_sites, vt.hooked(vh.crossvit_points)),
        "tnt": Case(vh.tnt, images, vh.tnt_sites, vt.hooked(vh.tnt_points)),
        "gcvit": Case(vh.gcvit, partial(images, 64), vh.gcvit_sites, vh.gcvit_layers),
        "mobilevit": Case(vh.mobilevit, images, vh.mobilevit_sites, vt.hooked(vh.mobilevit_points)),
        "cait_class_attention": Case(partial(cait, 1), images, cait_sites, cait_layers),
        "hf_deit": Case(hf.deit, images, hf.attention_sites),
        "hf_dinov2_registers": Case(hf.dinov2_registers, images, hf.attention_sites),
        "hf_clip_vision": Case(hf.clip_vision, images, hf.attention_sites),
        "hf_siglip_vision": Case(hf.siglip_vision, images, hf.attention_sites),
        "hf_beit": Case(hf.beit, images, hf.attention_sites),
        "hf_swin": Case(hf.swin, images, hf.swin_sites, hf.swin_layers),
    },
}
