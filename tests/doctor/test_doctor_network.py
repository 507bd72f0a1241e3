"""TLS and proxy settings from variables and config files, and the channel probe against loopback
HTTP and HTTPS servers."""

from __future__ import annotations

import functools
import http.server
import shutil
import ssl
import subprocess
import threading

import pytest
from doctor_helpers import by_check, statuses

from solver.doctor_checks.facts import ConfigSetting, NetworkFacts
from solver.doctor_checks.network import (
    gather_network,
    inspect_ca_files,
    network_findings,
    probe_url,
    run_probes,
)

PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def _facts(env=None, settings=None) -> NetworkFacts:
    """Network facts as gathering leaves them: settings, and what is at each CA path they name."""
    facts = NetworkFacts(env=dict(env or {}), settings=list(settings or []))
    facts.files = inspect_ca_files(facts)
    return facts


def test_nothing_configured_passes():
    findings = network_findings(_facts())
    assert statuses(findings, "tls.settings") == ["pass"]
    assert statuses(findings, "network.probe") == ["info"]


def test_ca_bundle_that_does_not_exist_folder_or_not_pem(tmp_path):
    (tmp_path / "notpem.crt").write_text("hello")
    (tmp_path / "good.pem").write_text(PEM)
    env = {
        "SSL_CERT_FILE": str(tmp_path / "missing.pem"),
        "REQUESTS_CA_BUNDLE": str(tmp_path),
        "PIP_CERT": str(tmp_path / "notpem.crt"),
        "CURL_CA_BUNDLE": str(tmp_path / "good.pem"),
    }
    findings = by_check(network_findings(_facts(env)), "tls.ca-file")
    by_variable = {f.evidence.split(":")[0]: f for f in findings}
    assert (
        by_variable["SSL_CERT_FILE"].status == "fail"
        and "does not exist" in by_variable["SSL_CERT_FILE"].summary
    )
    assert "unset SSL_CERT_FILE" in by_variable["SSL_CERT_FILE"].fix
    assert "folder" in by_variable["REQUESTS_CA_BUNDLE"].summary
    assert "no PEM certificate" in by_variable["PIP_CERT"].summary
    assert [f.status for f in findings].count("pass") == 1


def test_ca_known_to_conda_only_needs_ssl_cert_file(tmp_path):
    bundle = tmp_path / "corp.pem"
    bundle.write_text(PEM)
    condarc = ConfigSetting("conda.ssl_verify", str(bundle), "/home/u/.condarc")
    [finding] = by_check(network_findings(_facts(settings=[condarc])), "tls.ca-agreement")
    assert finding.status == "warn" and "rattler-based tools" in finding.summary
    assert finding.fix == f"export SSL_CERT_FILE={bundle}"


def test_different_bundles_warn(tmp_path):
    for name in ("a.pem", "b.pem"):
        (tmp_path / name).write_text(PEM)
    env = {"SSL_CERT_FILE": str(tmp_path / "a.pem"), "REQUESTS_CA_BUNDLE": str(tmp_path / "b.pem")}
    [finding] = by_check(network_findings(_facts(env)), "tls.ca-agreement")
    assert finding.status == "warn" and "different CA bundles" in finding.summary


def test_verification_turned_off_warns():
    settings = [
        ConfigSetting("conda.ssl_verify", "False", "/home/u/.condarc"),
        ConfigSetting("pip.trusted-host", "pypi.org files.pythonhosted.org", "/etc/pip.conf"),
    ]
    [finding] = by_check(network_findings(_facts({"PYTHONHTTPSVERIFY": "0"}, settings)), "tls.verification")
    assert finding.status == "warn"
    for text in ("conda ssl_verify: False", "pip trusted-host", "PYTHONHTTPSVERIFY=0"):
        assert text in finding.evidence
    assert "SSL_CERT_FILE" in finding.fix


def test_proxy_settings():
    env = {
        "HTTPS_PROXY": "proxy.corp:3128",
        "HTTP_PROXY": "http://proxy.corp:3128",
        "http_proxy": "http://other:8080",
    }
    findings = network_findings(_facts(env))
    [bad] = by_check(findings, "proxy.url")
    assert bad.status == "fail" and "no scheme" in bad.summary and "HTTPS_PROXY" in bad.summary
    [case] = by_check(findings, "proxy.case")
    assert case.status == "warn" and "HTTP_PROXY and http_proxy disagree" in case.summary
    conda_only = [ConfigSetting("conda.proxy_servers.https", "http://proxy.corp:3128", "/home/u/.condarc")]
    [finding] = by_check(network_findings(_facts(settings=conda_only)), "proxy.conda-only")
    assert (
        finding.status == "warn"
        and finding.fix == "export HTTPS_PROXY=http://proxy.corp:3128 HTTP_PROXY=http://proxy.corp:3128"
    )
    [port] = by_check(network_findings(_facts({"HTTPS_PROXY": "http://proxy:99999"})), "proxy.url")
    assert port.status == "fail" and "port" in port.summary


def test_gather_reads_condarc_pip_conf_and_pixi_config(tmp_path):
    home = tmp_path / "home"
    (home / ".config/pip").mkdir(parents=True)
    (home / ".config/pixi").mkdir(parents=True)
    (home / ".condarc").write_text(
        "ssl_verify: false\nchannel_alias: https://mirror.corp/conda\n"
        "channels: [conda-forge, defaults, https://example.org/mychannel]\n"
        "proxy_servers:\n  https: http://proxy.corp:3128\n"
    )
    (home / ".config/pip/pip.conf").write_text("[global]\ncert = /etc/corp.pem\ntrusted-host = pypi.org\n")
    (home / ".config/pixi/config.toml").write_text("tls-no-verify = true\n")
    facts = gather_network({"HTTPS_PROXY": "http://proxy.corp:3128", "PATH": "/bin"}, home, None)
    keys = {(s.key, s.value) for s in facts.settings}
    assert ("conda.ssl_verify", "False") in keys and ("pip.cert", "/etc/corp.pem") in keys
    assert ("rattler.tls-no-verify", "true") in keys and (
        "conda.proxy_servers.https",
        "http://proxy.corp:3128",
    ) in keys
    assert facts.env == {"HTTPS_PROXY": "http://proxy.corp:3128"}
    assert facts.channels == [
        "https://mirror.corp/conda/conda-forge",
        "https://repo.anaconda.com/pkgs/main",
        "https://example.org/mychannel",
    ]
    findings = network_findings(facts)
    assert "fail" in statuses(findings, "tls.ca-file")  # /etc/corp.pem does not exist here
    assert "tls-no-verify = true" in by_check(findings, "tls.verification")[0].evidence


def test_broken_config_file_is_a_warning_not_a_crash(tmp_path):
    (tmp_path / ".condarc").write_text("channels: [unclosed\n")
    findings = network_findings(gather_network({}, tmp_path, None))
    [finding] = by_check(findings, "config.unreadable")
    assert finding.status == "warn" and ".condarc" in finding.summary


@pytest.fixture
def channel_server(tmp_path):
    """A loopback HTTP server serving a channel with a noarch/repodata.json."""
    (tmp_path / "channel/noarch").mkdir(parents=True)
    (tmp_path / "channel/noarch/repodata.json").write_text('{"info": {"subdir": "noarch"}, "packages": {}}')
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def test_probe_reachable_missing_and_refused(channel_server, monkeypatch):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    facts = NetworkFacts(channels=[f"{channel_server}/channel", f"{channel_server}/nochannel"])
    with socket_closed_port() as closed:
        facts.probes = run_probes(facts, [f"http://127.0.0.1:{closed}/"], timeout=3)
    findings = by_check(network_findings(facts), "network.probe")
    outcome = {f.summary.split(" ")[0]: f for f in findings}
    assert outcome[f"{channel_server}/channel/noarch/repodata.json"].status == "pass"
    missing = outcome[f"{channel_server}/nochannel/noarch/repodata.json"]
    assert missing.status == "fail" and "404" in missing.evidence and "channel_alias" in missing.fix
    refused = outcome[f"http://127.0.0.1:{closed}/"]
    assert refused.status == "fail" and "refused" in refused.evidence.lower()
    assert "no proxy is set" in refused.fix


class socket_closed_port:
    """A loopback port that nothing listens on."""

    def __enter__(self) -> int:
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        return self.sock.getsockname()[1]  # bound, never listening: connections are refused

    def __exit__(self, *exc) -> None:
        self.sock.close()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command to make a certificate")
def test_probe_of_an_untrusted_https_server_points_at_ssl_cert_file(tmp_path, monkeypatch):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"https://127.0.0.1:{server.server_port}/cert.pem"
    try:
        for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "nothing-trusted.pem"))
        untrusted = probe_url(url, timeout=5)
        facts = NetworkFacts(probes=[untrusted])
        [finding] = by_check(network_findings(facts), "network.probe")
        assert finding.status == "fail" and "CERTIFICATE_VERIFY_FAILED" in finding.evidence
        assert finding.fix.startswith("export SSL_CERT_FILE=")
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the fix doctor gave, applied
        assert probe_url(url, timeout=5).ok
    finally:
        server.shutdown()
        server.server_close()


def test_probe_reports_a_dead_proxy(channel_server, monkeypatch):
    with socket_closed_port() as closed:
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{closed}")
        monkeypatch.setenv("NO_PROXY", "")
        monkeypatch.delenv("no_proxy", raising=False)
        facts = NetworkFacts(env={"HTTP_PROXY": f"http://127.0.0.1:{closed}"})
        facts.probes = [probe_url("http://example.invalid/noarch/repodata.json", timeout=3)]
    [finding] = by_check(network_findings(facts), "network.probe")
    assert finding.status == "fail" and f"127.0.0.1:{closed}" in finding.fix
    assert "refused" in finding.evidence.lower()  # the proxy was tried, not a DNS lookup of example.invalid


def test_fixes_never_point_tools_at_a_bundle_that_does_not_exist(tmp_path):
    missing = str(tmp_path / "missing.pem")
    conda_only = _facts(settings=[ConfigSetting("conda.ssl_verify", missing, "/home/u/.condarc")])
    [agreement] = by_check(network_findings(conda_only), "tls.ca-agreement")
    assert agreement.status == "warn" and missing not in agreement.fix and "tls.ca-file" in agreement.fix
    (tmp_path / "b.pem").write_text(PEM)
    differing = _facts({"SSL_CERT_FILE": missing, "REQUESTS_CA_BUNDLE": str(tmp_path / "b.pem")})
    findings = network_findings(differing)
    [agreement] = by_check(findings, "tls.ca-agreement")
    assert missing not in agreement.fix
    assert all(f"SSL_CERT_FILE={missing}" not in f.fix for f in findings if f.status != "pass")
    [ca_file] = [f for f in by_check(findings, "tls.ca-file") if f.status == "fail"]
    assert ca_file.evidence == f"SSL_CERT_FILE: {missing}" and "does not exist" in ca_file.summary
