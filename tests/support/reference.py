"""Where the project's reference material lives: ``shared/`` beside the repository checkout.

CI clones the repository anywhere with ``shared/`` next to it, so tests find the captured
samples relative to this file, never by an absolute path.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO.parent / "shared" / "reference" / "samples"
