"""Short, stable names for what a key covers: cache entries, units and a data tree's train files."""
from __future__ import annotations

import hashlib
import json


def fingerprint(**parts) -> str:
    """12 hex digits of the parts as sorted JSON: equal parts, equal name, in any process."""
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:12]
