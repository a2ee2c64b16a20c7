"""Version constants: tf.VERSION, tf.__version__, tf.GIT_VERSION, tf.COMPILER_VERSION.

VERSION is the TensorFlow API level flowgraph implements, "1.15.0" (TF1 graph mode as of
TF 1.15; DESIGN.md decision 1), not a release number of flowgraph itself: scripts compare it to
choose between API spellings, and they should take the TF 1.15 branch. GIT_VERSION is "unknown",
what TF reports for a build outside git. COMPILER_VERSION names the compiler that built the
Python interpreter, since flowgraph itself is not compiled.
"""

from __future__ import annotations

import platform as _platform

__all__ = ["COMPILER_VERSION", "GIT_VERSION", "VERSION", "__version__"]

VERSION = "1.15.0"
__version__ = VERSION
GIT_VERSION = "unknown"
COMPILER_VERSION = _platform.python_compiler()
