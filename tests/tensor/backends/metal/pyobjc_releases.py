"""The two pyobjc-core releases the Metal path is checked against: the host tests' stand-in
models both, and ``.github/workflows/macos.yml`` installs both on real macOS runners.

Before 13.0 pyobjc-core applied the ``new`` method family's ownership rule (the caller owns the
result) to class methods only, so every object from Metal's ``new*`` instance methods leaked
unless its selector's metadata said ``already_retained``; 13.0 applies it to instance methods
too (PyObjC issue 690: its test helpers gained ``-[OC_MethodCategories newWithInt:]`` and kin
in 13.0). pyobjc-framework-Metal has no 13.0 release yet: 12.2.2 is used with both.
"""

from __future__ import annotations

#: The newest pyobjc-core without the instance-method ``new`` family rule.
PYOBJC_BEFORE_NEW_FAMILY_FIX = "12.2.2"
#: The first pyobjc-core with it.
PYOBJC_AFTER_NEW_FAMILY_FIX = "13.0"
#: The pyobjc-framework-Metal release installed with either.
PYOBJC_METAL = "12.2.2"
