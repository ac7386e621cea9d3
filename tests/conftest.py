import sys
from pathlib import Path

# expected_kv.py and other test data modules sit beside the tests.
sys.path.insert(0, str(Path(__file__).parent))
