"""Every spelling of a refused address is refused, by the write paths and by the gateway's connection
path alike: one parser (``inference_gateway.addresses``, yarl as the client connects) decides.

A hypothesis fuzz spells each refused class (loopback, link-local, cloud metadata, unspecified, the
portal's own names) in Unicode and numeric variants (full-width digits, U+3002 / U+FF0E / U+FF61
dots, other NFKC digits, mixed case and scripts, percent-escapes, trailing dots, decimal, octal
and hex forms, IPv6, IPv4-mapped, IPv4-compatible and NAT64 IPv6) and sends each through
``validate_manifest`` (every write path's rule), and through a real gateway to a real loopback
backend with ``GATEWAY_ALLOW_LOOPBACK`` off, which must never be reached. Objects created in the
cluster (the real control plane; the API server accepts these under ``format: uri``) are refused
by the gateway as well. The connector refuses a refused address even when nothing else asked.
"""

from __future__ import annotations

import asyncio
import ipaddress
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import aiohttp
import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusters.validation.manifests import validate_manifest
from clusters.validation.schemas import ManifestInvalid
from inference_gateway.addresses import NotAnAddress, normalize_host, parse_backend_url
from inference_gateway.placement import Policy
from inference_gateway.resolver import guarded_connector
from models_app.controller import _deployment
from models_app.gateway_rules import gateway_rules
from models_app.models import InferenceModel
from tests.clusters.conftest import sample_manifest, wait_for
from tests.gateway.conftest import serve_model

OWN_HOST = "portal.example.org"
# A refused class, by address or name: (what is spelled, the words of its rule)
IPV4_CLASSES = {
    "127.0.0.1": "is loopback",
    "127.8.9.10": "is loopback",
    "169.254.169.254": "is a cloud metadata address",
    "100.100.100.200": "is a cloud metadata address",
    "168.63.129.16": "is a cloud metadata address",
    "169.254.10.10": "is link-local",
    "0.0.0.0": "is not a unicast address",
}
NAME_CLASSES = {
    "localhost": "is loopback",
    "api.localhost": "is loopback",
    "metadata.google.internal": "is a cloud metadata address",
    OWN_HOST: "is the portal's own address",
}
# Characters NFKC folds onto an ASCII digit (full-width, mathematical, circled, superscript), and dots.
DIGITS = {str(d): [str(d), chr(0xFF10 + d), chr(0x1D7CE + d), chr(0x1D7EC + d), chr(0x2070 + d) if d not in (1, 2, 3)
                   else "¹²³"[d - 1]] + ([chr(0x2460 + d - 1)] if d else []) for d in range(10)}
DOTS = [".", "\u3002", "\uff0e", "\uff61"]
NOT_A_HOST = ("not a host name", "not a valid URL", "zone id", "is not a valid uri")  # the last: the CRD schema


def spelled_digits(draw, text: str) -> str:
    out = []
    for char in text:
        if char in DIGITS:
            out.append(draw(st.sampled_from(DIGITS[char])))
        elif char == ".":
            out.append(draw(st.sampled_from(DOTS)))
        else:
            out.append(char)
    return "".join(out)


@st.composite
def ipv4_spelling(draw) -> tuple[str, str]:
    """A host spelling of a refused IPv4 address, and its class's rule."""
    address = draw(st.sampled_from(sorted(IPV4_CLASSES)))
    number = int(ipaddress.IPv4Address(address))
    octets = address.split(".")
    form = draw(st.sampled_from(["dotted", "decimal", "hex", "octal", "short", "mapped", "mapped-hex",
                                 "compatible", "nat64", "escaped"]))
    if form == "decimal":
        host = str(number)
    elif form == "hex":
        host = draw(st.sampled_from([f"0x{number:08x}", ".".join(f"0x{int(o):02X}" for o in octets)]))
    elif form == "octal":
        host = ".".join(f"0{int(o):o}" for o in octets)
    elif form == "short":
        host = f"{octets[0]}.{number & 0xFFFFFF}"
    elif form == "mapped":
        return f"[::ffff:{address}]", IPV4_CLASSES[address]
    elif form == "mapped-hex":
        return f"[0:0:0:0:0:FFFF:{number >> 16:x}:{number & 0xFFFF:x}]", IPV4_CLASSES[address]
    elif form == "compatible":
        return (f"[::{address}]", IPV4_CLASSES[address]) if number > 1 else ("[::]", "is not a unicast address")
    elif form == "nat64":
        return f"[64:ff9b::{address}]", IPV4_CLASSES[address]
    elif form == "escaped":
        return address.replace(".", "%2e", 1), "not a host name"
    else:
        host = address
    host = spelled_digits(draw, host)
    if draw(st.booleans()):
        host += draw(st.sampled_from(DOTS))  # a trailing dot
    return host, IPV4_CLASSES[address]


@st.composite
def name_spelling(draw) -> tuple[str, str]:
    """A host spelling of a refused name (upper case, full-width letters, Unicode dots, trailing dot)."""
    name = draw(st.sampled_from(sorted(NAME_CLASSES)))
    out = []
    for char in name:
        choice = draw(st.integers(0, 3))
        if char == ".":
            out.append(draw(st.sampled_from(DOTS)))
        elif char.isalpha() and choice == 1:
            out.append(char.upper())
        elif char.isalpha() and choice == 2:
            out.append(chr(0xFF41 + ord(char) - ord("a")))  # full-width
        elif char.isalpha() and choice == 3:
            out.append(chr(0xFF21 + ord(char) - ord("a")))  # full-width capital
        else:
            out.append(char)
    host = "".join(out) + draw(st.sampled_from(["", "."]))
    return host, NAME_CLASSES[name]


IPV6_SPELLINGS = {
    "[::1]": "is loopback",
    "[0:0:0:0:0:0:0:1]": "is loopback",
    "[0000::0001]": "is loopback",
    "[fe80::1]": "is link-local",
    "[FE80::abcd]": "is link-local",
    "[fe80::1%25eth0]": "zone id",
    "[fd00:ec2::254]": "is a cloud metadata address",
    "[::]": "is not a unicast address",
}
SPELLINGS = st.one_of(ipv4_spelling(), name_spelling(), st.sampled_from(sorted(IPV6_SPELLINGS.items())))
FUZZ = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))


def manifest(backend_url: str) -> dict:
    body = sample_manifest("inferencemodel-llama-2-7b.yaml")
    body["metadata"]["namespace"] = "team-a"
    body["spec"]["backendUrl"] = backend_url
    return body


@pytest.fixture
def no_loopback(settings):
    settings.GATEWAY_ALLOW_LOOPBACK = False
    settings.GATEWAY_OWN_HOSTS = [OWN_HOST]
    return settings


def test_every_spelling_of_a_refused_class_is_refused_at_validation(db, no_loopback) -> None:
    from clusters.models import Cluster

    cluster = Cluster.objects.create(name="prod", auth_method=Cluster.AuthMethod.SNAPSHOT)
    policy = Policy.load(cluster.pk)

    @FUZZ
    @given(SPELLINGS, st.sampled_from(["http", "https", "HTTP"]), st.sampled_from(["", ":8210", ":443"]))
    def check(spelling: tuple[str, str], scheme: str, port: str) -> None:
        host, rule = spelling
        url = f"{scheme}://{host}{port}/v1"
        with pytest.raises(ManifestInvalid) as caught:
            validate_manifest(InferenceModel, manifest(url), cluster)
        messages = [error.message for error in caught.value.errors if error.path == "spec.backendUrl"]
        assert messages, (url, caught.value.errors)
        assert rule in messages[0] or any(words in messages[0] for words in NOT_A_HOST), (url, messages)
        # the placement rule itself, as the gateway's catalog asks it of mirrored objects (no CRD schema before it)
        refused = policy.refusal(cluster.pk, "team-a", url)
        assert refused is not None and (rule in refused or any(words in refused for words in NOT_A_HOST[:3])), (
            url, refused)

    check()


def test_the_parser_reads_hosts_as_the_client_connects(no_loopback) -> None:
    """The host the rule judges is the host aiohttp would connect to (yarl's), canonical."""
    for url, host in (("http://\uff11\uff12\uff17\uff0e\uff10\uff0e\uff10\uff0e\uff11:8210", "127.0.0.1"),
                      ("http://127\u30020\u30020\u30021:8210", "127.0.0.1"),
                      ("http://0x7f.1:80", "127.0.0.1"),
                      ("http://[::ffff:7f00:1]", "127.0.0.1"),
                      ("http://VLLM.team-a.:8000", "vllm.team-a"),
                      ("http://\u0455vc.team-a:8000", "xn--vc-doc.team-a")):  # a Cyrillic look-alike is its xn-- name
        assert parse_backend_url(url).host == host, url


@FUZZ
@given(st.one_of(st.text(max_size=40), st.builds(lambda host, port: f"http://{host}{port}/v1", st.text(max_size=30),
                                                 st.sampled_from(["", ":80", ":99999", ":x"]))))
def test_any_text_is_an_address_or_a_stated_rule_never_a_crash(text: str) -> None:
    """The parser answers every input with a host or NotAnAddress (a 400 on the write paths, a
    refused route in the gateway), and what it accepts it reads the same again (one reading)."""
    for parse in (parse_backend_url, normalize_host):
        try:
            parsed = parse(text)
        except NotAnAddress:
            continue
        host = parsed.host if parse is parse_backend_url else parsed[0]
        assert host.isascii() and normalize_host(host)[0] == host, (text, host)


@pytest.mark.django_db(transaction=True)
def test_no_spelling_reaches_a_loopback_backend_through_the_gateway(
        gateway_settings, cluster, gateway, api_key, start_backend) -> None:
    backend = start_backend(host="127.0.0.1")
    gateway_settings.GATEWAY_ALLOW_LOOPBACK = False
    gateway_settings.GATEWAY_OWN_HOSTS = [OWN_HOST]
    headers = {"Authorization": f"Bearer {api_key}"}

    @FUZZ
    @given(SPELLINGS)
    def check(spelling: tuple[str, str]) -> None:
        host, _ = spelling
        row = serve_model(cluster, "m", f"http://{host}:{backend.port}")  # mirrored as it is: never validated
        answers: list[requests.Response] = []

        def routed() -> bool:
            """The row's notice lands within milliseconds of its commit, not before the commit
            returns: until then the model is unknown (404)."""
            answers.append(requests.post(f"{gateway.url}/v1/chat/completions", headers=headers, timeout=30,
                                         json={"model": "team-a/m", "messages": [{"role": "user", "content": "hi"}]}))
            return answers[-1].status_code != 404

        try:
            wait_for(routed, timeout=30, message="the model's notice to reach the gateway")
            answer = answers[-1]
            assert answer.status_code == 502, (host, answer.status_code, answer.text)
            assert answer.json()["error"]["code"] in ("backend_refused", "backend_unreachable"), (host, answer.text)
        finally:
            row.delete()

    check()
    assert "/v1/chat/completions" not in backend.stats()


def test_the_connector_refuses_a_refused_address_whatever_asked_before(no_loopback, start_backend) -> None:
    """The socket factory is the only way out: an IP literal (which aiohttp never sends to a
    resolver) to a loopback backend is refused when the socket would open."""
    backend = start_backend(host="127.0.0.1")

    async def get(url: str) -> int:
        async with aiohttp.ClientSession(connector=guarded_connector()) as session, session.get(url) as answer:
            return answer.status

    def run(url: str) -> int:
        with ThreadPoolExecutor(1) as pool:  # a loop of its own, whatever loop another test left on this thread
            return pool.submit(lambda: asyncio.run(get(url))).result()

    for host in ("127.0.0.1", "[::ffff:127.0.0.1]", "localhost"):
        with pytest.raises(aiohttp.ClientConnectorError, match="is loopback"):
            run(f"http://{host}:{backend.port}/stats")
    no_loopback.GATEWAY_ALLOW_LOOPBACK = True
    assert run(f"{backend.url}/stats") == 200  # development: loopback backends are fine


CLUSTER_SPELLINGS = (
    "http://\uff11\uff12\uff17\uff0e\uff10\uff0e\uff10\uff0e\uff11:{port}",
    "http://127\u30020\u30020\u30021:{port}",
    "http://127\uff610.0.1:{port}",
    "http://\uff4c\uff4f\uff43\uff41\uff4c\uff48\uff4f\uff53\uff54:{port}",
)


def test_models_created_in_the_cluster_with_spelled_loopback_are_not_routed(
        kube, gateway_settings, gateway, start_backend, make_user) -> None:
    """The API server stores these under ``format: uri``, the sync mirrors them as they are; the
    gateway refuses each, naming the host it would have connected to."""
    from accounts.models import NamespaceGrant, Team
    from accounts.tokens import issue_token

    cluster = kube.register()
    team = Team.objects.create(name="owners")
    NamespaceGrant.objects.create(team=team, cluster=cluster, namespace=kube.namespace)
    _, key = issue_token(make_user("owner", teams=[team]), "gateway")
    gateway_settings.GATEWAY_ALLOW_LOOPBACK = False
    backend = start_backend(host="127.0.0.1")
    for index, url in enumerate(CLUSTER_SPELLINGS):
        body = sample_manifest("inferencemodel-llama-2-7b.yaml")
        body["metadata"].update(name=f"spelled-{index}", namespace=kube.namespace)
        body["spec"].update(modelName=f"spelled-{index}", backendUrl=url.format(port=backend.port))
        kube.write(body)
    kube.sync()
    assert InferenceModel.objects.filter(cluster=cluster, name__startswith="spelled-").count() == len(CLUSTER_SPELLINGS)
    for index in range(len(CLUSTER_SPELLINGS)):
        answer = requests.post(f"{gateway.url}/v1/chat/completions", headers={"Authorization": f"Bearer {key}"},
                               json={"model": f"spelled-{index}", "messages": [{"role": "user", "content": "hi"}]},
                               timeout=30)
        assert (answer.status_code, answer.json()["error"]["code"]) == (502, "backend_refused"), answer.text
        message = answer.json()["error"]["message"]
        assert ("names 127.0.0.1, which is loopback" in message or "names localhost, which is loopback" in message)
    assert backend.stats() == {}


@pytest.mark.parametrize(("url", "port"), [
    ("http://svc", None), ("http://svc:9000", 9000), ("https://svc.team-a:8443/v1", 8443),
    ("http://svc:80", 80), ("http://svc.:9000", 9000),
])
def test_the_controller_reads_a_backends_port_as_the_gateway_connects(url: str, port: int | None) -> None:
    """The controller's container port comes from the gateway's parser (``models_app.gateway_rules``),
    never from a second reading of the field; a port no backend can have is refused by that parser."""
    assert gateway_rules().backend_port(url) == port
    cr = {"metadata": {"name": "m", "namespace": "team-a", "uid": "u"},
          "spec": {"modelName": "m", "memory": "1Gi", "backendUrl": url, "containerImage": "vllm"}}
    container = _deployment(cr, None, 1, datetime.now(UTC))["spec"]["template"]["spec"]["containers"][0]
    assert container["ports"] == [{"name": "http", "containerPort": port or 8000}]
    with pytest.raises(NotAnAddress):
        gateway_rules().backend_port("http://svc:0")
