"""The model options `complete` and `eval run` share, and opening what they name."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from rich.console import Console

from repomem.backends.base import Backend, backend_broken
from repomem.backends.factory import api_key_from_environment, connect_endpoint, open_backend, start_ahead
from repomem.cli.errors import UserError, ok
from repomem.cli.progress_bars import RichProgress
from repomem.config import Config, with_overrides
from repomem.failures import Failure, FailureKind

if TYPE_CHECKING:
    from repomem.backends.llama_process import StartedAhead


def model_choice(text: str) -> str:
    """An argparse type for `--model`: a file as an absolute path, an embedded model's name as it is.
    The model's child process runs in the temporary folder (repomem/backends/llama_process.py), where
    `--model ../my.gguf` named no file: the model process exited while loading it."""
    if os.sep in text or text.lower().endswith(".gguf") or os.path.lexists(text):
        return os.path.abspath(text)
    return text


def add_backend_options(parser: argparse.ArgumentParser, endpoints: bool = False) -> None:
    """The model choices of `complete` and `eval run` (one of them; default: the embedded GGUF)."""
    choice = parser.add_mutually_exclusive_group()
    choice.add_argument("--model", type=model_choice, default=None, metavar="NAME|FILE.gguf",
                        help="an embedded model (qwen2.5-coder-0.5b, qwen2.5-coder-1.5b) or a GGUF file, run by "
                             "llama.cpp in a child process (default: model.embedded_model)")
    if endpoints:
        choice.add_argument("--endpoint", action="append", default=None,
                            help="an OpenAI-compatible server, e.g. http://host:8000 (vLLM); repeat for several "
                                 "servers of one model (workers are spread over them)")
    else:
        choice.add_argument("--endpoint", default=None,
                            help="an OpenAI-compatible server, e.g. http://host:8000 (vLLM)")
    choice.add_argument("--hf", default=None, metavar="MODEL",
                        help="transformers (pip install 'repomem[hf]'): a checkpoint folder, a GGUF file or an "
                             "embedded model's name; CUDA when available")
    choice.add_argument("--vllm", default=None, metavar="MODEL", help="vLLM in process (GPU), e.g. a HF model path")
    parser.add_argument("--gpu-layers", type=int, default=None,
                        help="layers of a GGUF model on the GPU (default model.gpu_layers: -1 = all)")


def _refuse_empty_choices(args: argparse.Namespace) -> None:
    """`--model ""` (an unset shell variable) silently ran the default model: an empty name is no model."""
    for option in ("model", "endpoint", "hf", "vllm"):
        value = getattr(args, option, None)
        if value == "" or (isinstance(value, list) and "" in value):
            raise UserError(Failure(FailureKind.BAD_OPTION, f"--{option} is an empty string"))


def chosen_settings(args: argparse.Namespace, config: Config) -> Config:
    _refuse_empty_choices(args)
    if args.gpu_layers is not None and args.gpu_layers < -1:
        raise UserError(Failure(FailureKind.BAD_OPTION,
                                "--gpu-layers takes -1 (all layers), 0 (none) or a layer count"))
    if args.gpu_layers is not None:
        return with_overrides(config, model={"gpu_layers": args.gpu_layers})
    return config


def start_model_ahead(args: argparse.Namespace, config: Config) -> StartedAhead | None:
    """The embedded model's process started before the index step, which then runs while the
    model loads (repomem.backends.factory.start_ahead); None for a server or transformers."""
    if args.endpoint or args.hf or args.vllm:
        return None
    return start_ahead(chosen_settings(args, config), args.model or "")


def open_chosen_backends(args: argparse.Namespace, config: Config, err: Console,
                         ahead: StartedAhead | None = None) -> list[Backend]:
    """One backend, or one per `--endpoint` when several are given (all must serve one model).
    `ahead`: start_model_ahead's process, taken when it is the model wanted."""
    settings = chosen_settings(args, config)
    endpoints = args.endpoint if isinstance(args.endpoint, list) else [args.endpoint] if args.endpoint else []
    if len(endpoints) > 1:
        opened: list[Backend] = []
        for endpoint in endpoints:
            backend = connect_endpoint(endpoint, settings)
            if isinstance(backend, Failure):
                for previous in opened:
                    previous.close()
                raise UserError(backend)
            opened.append(backend)
        return opened
    with RichProgress(err) as progress:
        return [ok(open_backend(settings, progress, model_path=args.model or "",
                                endpoint=endpoints[0] if endpoints else "", hf_model=args.hf or "",
                                vllm_model=args.vllm or "", ahead=ahead))]


class KeptBackend:
    """The model a resident process (`repomem daemon`) keeps open between `complete` commands: one
    (a model holds gigabytes), reused while a command asks for the same model with the same
    settings; closed when another is asked for, after a command that found it broken or was
    interrupted, and when the daemon ends."""

    def __init__(self) -> None:
        self._key: object = None
        self._backend: Backend | None = None

    @staticmethod
    def key(args: argparse.Namespace, config: Config) -> object:
        """What a kept backend must share with a command's: its options, settings, and the API key
        and proxies its client's environment holds (a key changed in the shell reused the old one,
        refused; a server reached through the proxy of the first command's `http_proxy` was still
        reached through it after the variable was unset, where a command of its own found no way)."""
        endpoints = args.endpoint if isinstance(args.endpoint, list) else [args.endpoint or config.model.endpoint]
        return (args.model, args.endpoint, args.hf, args.vllm, args.gpu_layers, config.model,
                api_key_from_environment(config.model), _proxies(endpoints))

    def take(self, key: object) -> Backend | None:
        """The backend kept for `key`, or None (and whatever another key kept is closed)."""
        if self._backend is not None and self._key != key:
            self.close()
        return self._backend

    @property
    def process_id(self) -> int | None:
        """The kept model's child process, where it runs in one."""
        return getattr(self._backend, "pid", None)

    def keep(self, key: object, backend: Backend) -> None:
        self._key, self._backend = key, backend

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()
        self.forget()

    def forget(self) -> None:
        self._key, self._backend = None, None


def model_override(model: str | None) -> dict[str, str] | None:
    """`--model NAME|FILE` as the setting it stands for: an embedded model's name as
    model.embedded_model, so the levers measured with that model apply (SettingRules.models) unless
    the settings set them; a file as model.model_path, so none measured with another model do."""
    if not model:
        return None
    from repomem.backends.factory import embedded_model_name

    return {"model.embedded_model": model} if embedded_model_name(model) else {"model.model_path": model}


def _proxies(endpoints: list[str]) -> tuple[str | None, ...]:
    """The proxy the environment names for each model server (None: reached directly, or a URL
    that is none, which opening the backend then says)."""
    if not any(endpoints):
        return ()
    from repomem.backends.http_sockets import proxy_for  # httpx: only where a server is named

    proxies = []
    for endpoint in endpoints:
        try:
            proxies.append(proxy_for(endpoint) if endpoint else None)
        except ValueError:  # `http://[::1`
            proxies.append(None)
    return tuple(proxies)


# Set by a resident process only (repomem/cli/daemon_server.py); a one-command process keeps nothing.
KEPT_BACKEND: KeptBackend | None = None


def release_backend(backend: Backend, key: object, error: BaseException | None) -> None:
    """After a command: the backend kept for the next one in a resident process, unless the command
    found it broken or was interrupted in the middle of a call; closed otherwise."""
    usable = error is None or (isinstance(error, UserError) and not backend_broken(error.failure))
    if KEPT_BACKEND is not None and usable:
        KEPT_BACKEND.keep(key, backend)
        return
    if KEPT_BACKEND is not None:
        KEPT_BACKEND.forget()  # whatever it kept is this backend (take closed any other)
    backend.close()
