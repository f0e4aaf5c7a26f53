"""Which GGUF file `model=` names: a path, or a name of drift's model registry (the same
models.toml and cache, ~/.cache/drift or $DRIFT_CACHE, as `drift -m NAME`). None is the
registry's default model. A registered model that is not cached yet is fetched by
`drift pull NAME`; the package does not download."""

import os
import tomllib
from pathlib import Path

from ._drift import EngineError


def cache_dir() -> Path:
    return Path(os.environ.get("DRIFT_CACHE") or Path.home() / ".cache" / "drift")


def registry_path() -> Path:
    return Path(os.environ.get("DRIFT_MODEL_REGISTRY") or Path(__file__).with_name("models.toml"))


def resolve_model(model: str | os.PathLike | None) -> str:
    if model is not None:
        model = os.fspath(model)
        if os.path.isfile(model):
            return model
        if "/" in model or model.endswith(".gguf"):
            raise EngineError(f"model file '{model}' does not exist")
    try:
        with open(registry_path(), "rb") as f:
            registry = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise EngineError(f"the model registry {registry_path()} cannot be read: {e}") from None
    name = model if model is not None else registry.get("default", "")
    entry = registry.get("models", {}).get(name)
    if entry is None:
        raise EngineError(f"'{name}' is neither a file nor a model name (`drift list` shows the names)")
    path = cache_dir() / entry["file"]
    if not path.is_file():
        raise EngineError(f"{name} is not in {cache_dir()}: fetch it with `drift pull {name}`")
    return str(path)
