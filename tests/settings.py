"""The test suite's settings (pytest.ini): the site's own, with the fast bundled model unless EXPLAINER_MODEL says
otherwise. Set in the environment, so the servers and workers the tests start choose it too."""
import os

os.environ.setdefault("EXPLAINER_MODEL", "bundled")

from explainer.settings import *  # noqa: E402,F401,F403
