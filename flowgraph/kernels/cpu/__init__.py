"""NumPy kernels for the CPU device; importing this package registers them all."""

from flowgraph.kernels.cpu import array, control_flow, math, sendrecv, variables  # noqa: F401
from flowgraph.kernels.cpu import array_index  # noqa: F401
from flowgraph.kernels.cpu import random  # noqa: F401
from flowgraph.kernels.cpu import array_space  # noqa: F401
from flowgraph.kernels.cpu import training  # noqa: F401
from flowgraph.kernels.cpu import grad_support  # noqa: F401
from flowgraph.kernels.cpu import batch_norm, candidate_sampling, conv, nn, pooling  # noqa: F401
from flowgraph.kernels.cpu import linalg, linalg_decomp  # noqa: F401
from flowgraph.kernels.cpu import logging  # noqa: F401
from flowgraph.kernels.cpu import tensor_array  # noqa: F401
from flowgraph.kernels.cpu import summary  # noqa: F401
from flowgraph.kernels.cpu import script_ops  # noqa: F401
from flowgraph.kernels.cpu import segment  # noqa: F401
from flowgraph.kernels.cpu import lookup  # noqa: F401
from flowgraph.kernels.cpu import io  # noqa: F401
from flowgraph.kernels.cpu import data_flow  # noqa: F401
from flowgraph.kernels.cpu import readers  # noqa: F401
from flowgraph.kernels.cpu import parsing  # noqa: F401
from flowgraph.kernels.cpu import read_parse  # noqa: F401
from flowgraph.kernels.cpu import string_ops  # noqa: F401
from flowgraph.kernels.cpu import image  # noqa: F401
from flowgraph.kernels.cpu import sparse  # noqa: F401
from flowgraph.kernels.cpu import accumulators  # noqa: F401
from flowgraph.kernels.cpu import sparse_map  # noqa: F401
from flowgraph.kernels.cpu import beam_search  # noqa: F401
from flowgraph.kernels.cpu import functional  # noqa: F401
from flowgraph.kernels.cpu import dataset_sources, dataset_transforms  # noqa: F401
from flowgraph.kernels.cpu import dataset_batch, dataset_shuffle  # noqa: F401
from flowgraph.kernels.cpu import dataset_parallel, dataset_iterators  # noqa: F401
from flowgraph.kernels.cpu import dataset_cache, dataset_reduce, dataset_select  # noqa: F401
from flowgraph.kernels.cpu import dataset_group, dataset_sparse  # noqa: F401
from flowgraph.kernels.cpu import special_math  # noqa: F401
from flowgraph.kernels.cpu import sets  # noqa: F401
from flowgraph.kernels.cpu import image_color  # noqa: F401
from flowgraph.kernels.cpu import image_boxes  # noqa: F401
from flowgraph.kernels.cpu import fused  # noqa: F401
from flowgraph.kernels.cpu import array_nd  # noqa: F401
from flowgraph.kernels.cpu import image_resample  # noqa: F401
from flowgraph.kernels.cpu import conv3d  # noqa: F401
from flowgraph.kernels.cpu import weight_updates  # noqa: F401
from flowgraph.kernels.cpu import bfloat16  # noqa: F401  (after every kernel it wraps)
