"""A Kubernetes API server for tests, speaking the REST protocol over real HTTP.

No registry ships kube-apiserver, and the sync must be tested against the behaviour the
official ``kubernetes`` client sees from a real one: resourceVersions, 409 on stale writes,
finalizers, watch replay and 410, paging, faults. This builds that on kmock's
``KubernetesEmulator`` (see kube_handler.py for what is reused and why the rest is not) and
runs it in a background thread with its own event loop, so synchronous code under test can
call it like a cluster::

    with KubeApiServer() as server:
        server.register_crd("inference.eh-ops.io", "v1alpha1", "inferencemodels", "InferenceModel")
        with server.make_api_client() as api_client:
            kubernetes.client.CustomObjectsApi(api_client).list_cluster_custom_object(...)

``python -m tests.support.kube_api_server`` serves the CRDs of ``platform/crds`` for kubectl.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import pathlib
import threading
from collections.abc import Coroutine, Mapping
from types import TracebackType
from typing import Any, Self, TypeVar

import kmock
import kubernetes.client
import yaml

from tests.support.kube_handler import Fault, FaultInjector, KubeApiHandler
from tests.support.kube_model import CORE_RESOURCES, ApiError, ResourceType, Selector, resources_from_crd
from tests.support.kube_store import KubeStore

T = TypeVar("T")
REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]


class KubeApiServer:
    """The test API server: lifecycle, client configuration, and test-side controls.

    The store, the faults and the watch history outlive ``stop()``/``start()``, so a restart
    on the same port looks to clients like an API server that came back.
    """

    def __init__(self, *, host: str = "127.0.0.1", port: int | None = None, bookmark_interval: float = 1.0,
                 max_requests: int = 1000, max_history: int = 200_000) -> None:
        self.host = host
        self._port = port
        self._bookmark_interval = bookmark_interval
        self._max_requests = max_requests
        self.store = KubeStore(max_history=max_history)
        self.faults = FaultInjector()
        for resource in CORE_RESOURCES:
            self.store.register(resource)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._handler: KubeApiHandler | None = None
        self._server: kmock.Server | None = None

    # Lifecycle ------------------------------------------------------------------------------

    def start(self) -> Self:
        """Serve in a new thread and event loop; on the previous port after a ``stop()``."""
        if self._loop is not None:
            raise RuntimeError("the server is already running")
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="kube-api-server", daemon=True)
        thread.start()
        self._loop, self._thread = loop, thread
        handler = KubeApiHandler(store=self.store, faults=self.faults, bookmark_interval=self._bookmark_interval,
                                 max_requests=self._max_requests)
        try:
            self._server = self._call(self._serve(handler))
        except BaseException:
            self._stop_loop()
            raise
        self._handler = handler
        self._port = self._server.port
        return self

    async def _serve(self, handler: KubeApiHandler) -> kmock.Server:
        await handler.__aenter__()
        server = kmock.Server(handler, host=self.host, port=self._port)
        await server.__aenter__()
        return server

    def stop(self) -> None:
        """Close open watches (cleanly), stop listening and end the thread."""
        if self._loop is None:
            return
        if self._handler is not None and self._server is not None:
            self._call(self._shutdown(self._handler, self._server))
        self._handler = self._server = None
        self._stop_loop()

    def restart(self) -> None:
        """Stop and start again on the same port; clients see dropped connections meanwhile.

        The store, faults and watch history carry over; ``handler`` is a new kmock handler, so
        reactions added with kmock's DSL and the recorded requests do not.
        """
        self.stop()
        self.start()

    async def _shutdown(self, handler: KubeApiHandler, server: kmock.Server) -> None:
        await handler.cut_watches("graceful")  # aiohttp would otherwise wait for them to end
        await server.__aexit__(None, None, None)
        await handler.__aexit__(None, None, None)

    def _stop_loop(self) -> None:
        assert self._loop is not None and self._thread is not None
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()
        self._loop = self._thread = None

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine in the server's loop and wait for its result."""
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=30)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stop()

    @property
    def handler(self) -> KubeApiHandler:
        """The running kmock handler: its request views and reaction DSL work as in kmock."""
        if self._handler is None:
            raise RuntimeError("the server is not running")
        return self._handler

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the server has not been started yet")
        return self._port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    # Clients --------------------------------------------------------------------------------

    def make_configuration(self) -> kubernetes.client.Configuration:
        """A fresh client configuration for this server (never the process-wide default)."""
        configuration = kubernetes.client.Configuration()
        configuration.host = self.url
        return configuration

    def make_api_client(self) -> kubernetes.client.ApiClient:
        return kubernetes.client.ApiClient(self.make_configuration())

    def write_kubeconfig(self, path: str | pathlib.Path, context: str = "kube-api-server") -> pathlib.Path:
        """A kubeconfig for kubectl or ``kubernetes.config.load_kube_config``."""
        path = pathlib.Path(path)
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": context, "cluster": {"server": self.url}}],
            "users": [{"name": context, "user": {"token": "test"}}],
            "contexts": [{"name": context, "context": {"cluster": context, "user": context,
                                                        "namespace": "default"}}],
            "current-context": context,
        }))
        return path

    # Resource types -------------------------------------------------------------------------

    def register_crd(self, group: str, version: str, plural: str, kind: str, *, namespaced: bool = True,
                     status_subresource: bool = True, singular: str = "",
                     short_names: tuple[str, ...] = ()) -> ResourceType:
        """Serve a custom resource (at runtime; running clients see it on their next discovery)."""
        return self.store.register(ResourceType(
            group=group, version=version, plural=plural, kind=kind, namespaced=namespaced,
            status_subresource=status_subresource, singular=singular, short_names=short_names))

    def register_crd_manifest(self, manifest: Mapping[str, Any]) -> list[ResourceType]:
        """Serve every served version of a ``CustomResourceDefinition`` manifest."""
        return [self.store.register(resource) for resource in resources_from_crd(manifest)]

    def load_crds(self, folder: str | pathlib.Path) -> list[ResourceType]:
        """Register the CRDs of every ``*.yaml``/``*.yml`` file in ``folder`` (other kinds skipped)."""
        registered: list[ResourceType] = []
        folder = pathlib.Path(folder)
        for path in sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")]):
            for document in yaml.safe_load_all(path.read_text()):
                if isinstance(document, Mapping) and document.get("kind") == "CustomResourceDefinition":
                    registered += self.register_crd_manifest(document)
        return registered

    # Test-side store access -----------------------------------------------------------------

    @property
    def resource_version(self) -> str:
        """The cluster's current resourceVersion (the last write's)."""
        return str(self.store.resource_version)

    def put_object(self, manifest: Mapping[str, Any], *, field_manager: str | None = None) -> dict[str, Any]:
        """Create or replace an object as another cluster writer would (status included):
        it gets a new resourceVersion and watchers see ADDED or MODIFIED. No HTTP involved."""
        return copy.deepcopy(self.store.put(manifest, manager=field_manager).object)

    def get_object(self, group: str, version: str, plural: str, namespace: str | None,
                   name: str) -> dict[str, Any] | None:
        try:
            return copy.deepcopy(self.store.get(self._resource(group, version, plural), namespace, name))
        except ApiError:
            return None

    def delete_object(self, group: str, version: str, plural: str, namespace: str | None,
                      name: str) -> dict[str, Any] | None:
        """Delete as the API does: returns the object while finalizers keep it, else None."""
        result = self.store.delete(self._resource(group, version, plural), namespace, name)
        return None if result.removed else copy.deepcopy(result.object)

    def objects(self, plural: str, *, group: str | None = None, namespace: str | None = None) -> list[dict[str, Any]]:
        """Copies of the stored objects of a plural (name the group if two groups share it)."""
        resource = self.store.find_plural(plural, group)
        return copy.deepcopy(self.store.select(resource, namespace, Selector()))

    def compact(self) -> str:
        """Forget the watch history up to now: older resourceVersions then get 410 on watch."""
        return str(self.store.compact())

    def expire_continue_tokens(self) -> int:
        """Make every outstanding list ``continue`` token answer 410 Expired."""
        return self.store.expire_continue_tokens()

    # Faults ---------------------------------------------------------------------------------

    def inject(self, verb: str, plural: str | None = None, *, name: str | None = None,
               namespace: str | None = None, status: int = 500, times: int | None = 1,
               message: str | None = None, retry_after: int | None = None) -> Fault:
        """Answer the next ``times`` matching requests (None: all) with an error ``Status``
        without touching the store. ``verb`` is get, list, watch, create, update (PUT), patch,
        delete or ``*``; a 410 on watch arrives as an ERROR event in the stream, as for real.

        ``retry_after`` adds a Retry-After header; beware that urllib3 (under the official
        client) then silently retries GET, PUT and DELETE answered 429 or 503.
        """
        return self.faults.add(Fault(verb=verb, plural=plural, name=name, namespace=namespace, status=status,
                                     times=times, message=message, retry_after=retry_after))

    def clear_faults(self) -> None:
        self.faults.clear()

    def disconnect_watches(self, *, graceful: bool = False) -> int:
        """End every open watch: by default as a dropped connection (the client gets a
        ProtocolError), with ``graceful`` as a clean end of stream. Returns how many."""
        return self._call(self.handler.cut_watches("graceful" if graceful else "abort"))

    @property
    def bookmark_interval(self) -> float:
        """Seconds between BOOKMARK events; setting it applies to watches opened from then on."""
        return self._bookmark_interval

    @bookmark_interval.setter
    def bookmark_interval(self, seconds: float) -> None:
        self._bookmark_interval = seconds
        if self._handler is not None:
            self._handler.bookmark_interval = seconds

    def _resource(self, group: str, version: str, plural: str) -> ResourceType:
        resource = self.store.resource(group, version, plural)
        if resource is None:
            raise LookupError(f"resource {plural}.{group}/{version} is not registered")
        return resource


def main(argv: list[str] | None = None) -> None:
    """Serve until interrupted, with the CRDs of a folder, and write a kubeconfig for kubectl."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001, help="0 picks a free port")
    parser.add_argument("--crds", type=pathlib.Path, default=REPO_ROOT / "platform" / "crds",
                        help="folder of CustomResourceDefinition YAML files (skipped if missing)")
    parser.add_argument("--kubeconfig", type=pathlib.Path, default=pathlib.Path("kube-api-server.kubeconfig"))
    parser.add_argument("--bookmark-interval", type=float, default=60.0)
    args = parser.parse_args(argv)

    server = KubeApiServer(host=args.host, port=args.port or None, bookmark_interval=args.bookmark_interval)
    loaded = server.load_crds(args.crds) if args.crds.is_dir() else []
    with server:
        server.write_kubeconfig(args.kubeconfig)
        for resource in loaded:
            print(f"serving {resource.resource_name}/{resource.version} ({resource.kind})")
        print(f"listening on {server.url}; KUBECONFIG={args.kubeconfig.resolve()} kubectl get ns")
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
