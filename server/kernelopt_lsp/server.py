"""The language server's shell: the lifecycle (initialize, settings, shutdown) and the wiring.

Each feature is a module of ``features/`` that registers its own LSP methods and commands and
works with a small context of its own (the client, the open documents, the dump views, the job
runner, ...); ``create_server`` builds those and registers the features. No feature imports
this module.

The server process never imports torch or triton: dumps are read with the AST parser, and all
profiling, compiling and gating happens in job subprocesses (``kernelopt ... --events --json``).
Parsing runs on one indexer thread, so hovers are answered while a file is being read and
while a job runs.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from kernelopt_core.job_runner import ArgvBuilder, JobRunner, cli_argv

from . import __version__
from .client import EditorClient
from .context import Lifecycle
from .documents import SharedIndex
from .features import actions, diagnostics, edits, hover, jobs, lenses, watching
from .providers import Providers
from .providers.dump_provider import DumpProvider
from .providers.user_kernel_provider import UserKernelProvider
from .results import ResultStore
from .settings import Settings, parse_settings
from .user_kernels import UserKernelContext, UserKernelFiles
from .views import DumpViews
from .workspace import ProjectWorkspace

SETTINGS_SECTION = "kernelopt"


class KernelOptServer(LanguageServer):
    """The settings, the lifecycle hooks, and what every feature shares: the client, the project
    and the job runner."""

    def __init__(self, *, argv_builder: ArgvBuilder = cli_argv):
        super().__init__("kernelopt-lsp", __version__,
                         text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.settings = Settings()
        self.init_options: Any = None
        self.lifecycle = Lifecycle()
        self.client = EditorClient(self)
        self.project = ProjectWorkspace(self)
        self.runner = JobRunner(argv_builder=argv_builder)

    def current_settings(self) -> Settings:
        return self.settings

    def apply_settings(self, raw: Any) -> list[str]:
        roots = self.project.roots()
        self.settings, problems = parse_settings(raw, self.settings, roots[0] if roots else None)
        return problems

    async def pull_configuration(self) -> list[str]:
        raw = await self.client.configuration(SETTINGS_SECTION)
        return self.apply_settings(raw) if raw else []

    def report_setting_problems(self, problems: list[str]) -> None:
        if problems:
            self.client.message("bad setting: " + "; ".join(problems), types.MessageType.Warning)


def create_server(*, argv_builder: ArgvBuilder = cli_argv, debounce_s: float = 0.15) -> KernelOptServer:
    """The server with every feature registered; ``argv_builder`` says how a job's CLI is started
    (tests point it at a stand-in), ``debounce_s`` how long the folder watcher waits for quiet."""
    server = KernelOptServer(argv_builder=argv_builder)
    _register_lifecycle(server)
    _register_features(server, debounce_s)
    return server


def _register_lifecycle(server: KernelOptServer) -> None:
    @server.feature(types.INITIALIZE)
    def on_initialize(params: types.InitializeParams) -> None:
        server.init_options = params.initialization_options
        server.client.name = params.client_info.name if params.client_info else ""

    @server.feature(types.INITIALIZED)
    async def on_initialized(params: types.InitializedParams) -> None:
        problems = server.apply_settings(server.init_options) if server.init_options else []
        problems += await server.pull_configuration()
        server.report_setting_problems(problems)
        await server.lifecycle.settings_changed()

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def on_configuration(params: types.DidChangeConfigurationParams) -> None:
        raw = params.settings
        pushed = isinstance(raw, dict) and bool(raw.get(SETTINGS_SECTION))
        problems = server.apply_settings(raw) if pushed else []
        if not problems and not pushed:  # a client that only says "changed": ask it
            problems = await server.pull_configuration()
        server.report_setting_problems(problems)
        await server.lifecycle.settings_changed()

    @server.feature(types.SHUTDOWN)
    async def on_shutdown(params: Any = None) -> None:
        await server.lifecycle.shutdown()


def _register_features(server: KernelOptServer, debounce_s: float) -> None:
    client, project, runner, lifecycle = server.client, server.project, server.runner, server.lifecycle
    settings = server.current_settings
    results = ResultStore()  # profiles, gate verdicts and runs, in memory
    index = SharedIndex()  # the dumps and kernel files of the watched folders
    indexer = ThreadPoolExecutor(1, thread_name_prefix="kernelopt-index")  # the one thread that parses
    views = DumpViews(index, indexer, project, results)
    user_kernels = UserKernelFiles(UserKernelContext(project, index, indexer, settings))
    # Asked in this order, the first claim answering. A project's own kernel files come first: the dump
    # index may know such a file too, and read as a dump it would be an unreadable one.
    providers = Providers([UserKernelProvider(user_kernels, results), DumpProvider(views, results, project)])

    published = diagnostics.register(server, diagnostics.DiagnosticsContext(client, providers))
    jobs.register(server, jobs.JobsContext(client, project, settings, runner, results, views, user_kernels,
                                           published, lifecycle))
    watching.register(server, watching.WatchingContext(client, project, settings, views, user_kernels, published,
                                                       lifecycle, debounce_s))
    hover.register(server, hover.HoverContext(project, providers))
    lenses.register(server, lenses.LensContext(providers, runner))
    actions.register(server, actions.ActionContext(client, project, views, results, providers, runner))
    edits.register(server, edits.EditsContext(client, project, views, user_kernels, results, published))
    lifecycle.on_shutdown(lambda: indexer.shutdown(wait=False, cancel_futures=True))
