"""Stand-in for Isaac Gym's Python package (tests only). All it keeps of the real one is the rule a script must
follow to load it: it refuses to load once torch is loaded, so a script has to import it before torch."""

import sys

if "torch" in sys.modules:
    raise ImportError("stand-in isaacgym: torch was imported before isaacgym; import isaacgym first")
