# sandboxd environment python-datascience.
#
# matplotlib insists on a *writable* config/cache directory (otherwise it
# warns and rebuilds its font list in a temporary directory on every run,
# ~1.5 s with fonts-noto-cjk). The environment sets MPLCONFIGDIR to a
# directory in the exec's private /tmp, and this seeds it with the font list
# built at install time, so nothing is written into /workspace and no font
# scan happens in the payload. It runs with the payload's own rights.
import os as _os


def _sandboxd_seed_matplotlib_cache():
    cache = _os.environ.get("MPLCONFIGDIR", "")
    if not cache.startswith("/tmp/"):
        return
    src = _os.path.join(_os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))), "matplotlib")
    try:
        _os.makedirs(cache, exist_ok=True)
        for name in _os.listdir(src):
            dst = _os.path.join(cache, name)
            if name.startswith("fontlist-") and not _os.path.exists(dst):
                with open(_os.path.join(src, name), "rb") as f, open(dst, "xb") as g:
                    g.write(f.read())
    except OSError:
        pass


_sandboxd_seed_matplotlib_cache()
del _sandboxd_seed_matplotlib_cache
