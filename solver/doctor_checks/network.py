"""TLS and proxy settings of pip, conda and rattler-based tools, and an optional channel probe.

Most "SSL: CERTIFICATE_VERIFY_FAILED" reports come from a corporate CA that one tool knows about and
another does not: conda reads .condarc `ssl_verify`, pip its `cert`, requests REQUESTS_CA_BUNDLE, and
rattler-based tools (pixi, uv, this solver) SSL_CERT_FILE. The checks make those agree.
"""

from __future__ import annotations

import configparser
import http.client
import os
import ssl
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from .facts import ConfigSetting, Facts, NetworkFacts, ProbeResult
from .findings import Finding, failed, info, passed, warned

CA_FILE_VARIABLES = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_CERT")
PROXY_VARIABLES = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY")
OTHER_VARIABLES = (
    "SSL_CERT_DIR",
    "NO_PROXY",
    "PIP_TRUSTED_HOST",
    "CONDA_SSL_VERIFY",
    "PYTHONHTTPSVERIFY",
    "PIP_PROXY",
    "PIP_INDEX_URL",
)
DEFAULT_CHANNEL_ALIAS = "https://conda.anaconda.org"
DEFAULT_PIP_INDEX = "https://pypi.org/simple"
FALSE_WORDS = ("false", "0", "no", "off")


# ---------------------------------------------------------------- gathering


def _relevant_env(env: Mapping[str, str]) -> dict[str, str]:
    names = CA_FILE_VARIABLES + PROXY_VARIABLES + OTHER_VARIABLES
    found = {}
    for name in names:
        for spelling in (name, name.lower()):
            if env.get(spelling):
                found[spelling] = env[spelling]
    return found


def condarc_paths(env: Mapping[str, str], home: Path, prefix: Path | None) -> list[Path]:
    """conda's search order for .condarc (later files override earlier ones)."""
    paths = [Path("/etc/conda/.condarc"), Path("/etc/conda/condarc"), Path("/var/lib/conda/.condarc")]
    if env.get("CONDA_ROOT"):
        paths.append(Path(env["CONDA_ROOT"]) / ".condarc")
    paths += [
        home / ".config/conda/.condarc",
        home / ".config/conda/condarc",
        home / ".conda/.condarc",
        home / ".condarc",
    ]
    if prefix is not None:
        paths.append(prefix / ".condarc")
    if env.get("CONDARC"):
        paths.append(Path(env["CONDARC"]))
    return paths


def pip_config_paths(env: Mapping[str, str], home: Path, prefix: Path | None) -> list[Path]:
    """pip's configuration files, global first, then user, then site."""
    paths = [Path("/etc/pip.conf"), Path("/etc/xdg/pip/pip.conf")]
    if env.get("APPDATA"):
        paths.append(Path(env["APPDATA"]) / "pip" / "pip.ini")
    paths += [home / ".pip/pip.conf", home / ".config/pip/pip.conf"]
    if prefix is not None:
        paths += [prefix / "pip.conf", prefix / "pip.ini"]
    if env.get("PIP_CONFIG_FILE"):
        paths.append(Path(env["PIP_CONFIG_FILE"]))
    return paths


def rattler_config_paths(home: Path) -> list[Path]:
    """The config.toml chain that pixi and py-rattler read (see reference rattler.md section 6)."""
    return [
        Path("/etc/rattler/config.toml"),
        Path("/etc/pixi/config.toml"),
        home / ".config/rattler/config.toml",
        home / ".config/pixi/config.toml",
        home / ".pixi/config.toml",
    ]


def _read_condarc(path: Path) -> tuple[list[ConfigSetting], list[str]]:
    try:
        import yaml
    except ImportError:
        return [
            ConfigSetting("conda.unreadable", "PyYAML is not installed, so .condarc was not read", str(path))
        ], []

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        return [ConfigSetting("conda.unreadable", str(exc).splitlines()[0], str(path))], []
    if not isinstance(data, dict):
        return [], []
    settings = []
    if "ssl_verify" in data:
        settings.append(ConfigSetting("conda.ssl_verify", str(data["ssl_verify"]), str(path)))
    proxies = data.get("proxy_servers") or {}
    if isinstance(proxies, dict):
        for scheme, url in proxies.items():
            settings.append(ConfigSetting(f"conda.proxy_servers.{scheme}", str(url), str(path)))
    if data.get("channel_alias"):
        settings.append(ConfigSetting("conda.channel_alias", str(data["channel_alias"]), str(path)))
    channels = [str(c) for c in data.get("channels") or [] if isinstance(c, str)]
    return settings, channels


def _read_pip_config(path: Path) -> list[ConfigSetting]:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, configparser.Error) as exc:
        return [ConfigSetting("pip.unreadable", str(exc).splitlines()[0], str(path))]
    settings = []
    for section in ("global", "install"):
        if not parser.has_section(section):
            continue
        for key in ("cert", "trusted-host", "proxy", "index-url", "client-cert"):
            if parser.has_option(section, key):
                value = " ".join(parser.get(section, key).split())
                settings.append(ConfigSetting(f"pip.{key}", value, str(path)))
    return settings


def _read_rattler_config(path: Path) -> list[ConfigSetting]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: no TOML reader in the standard library
        return []
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return [ConfigSetting("rattler.unreadable", str(exc).splitlines()[0], str(path))]
    settings = []
    for key in ("tls-no-verify", "tls-root-certs"):
        if key in data:
            settings.append(ConfigSetting(f"rattler.{key}", str(data[key]).lower(), str(path)))
    proxy = data.get("proxy-config") or {}
    for scheme in ("http", "https"):
        if isinstance(proxy, dict) and proxy.get(scheme):
            settings.append(ConfigSetting(f"rattler.proxy-config.{scheme}", str(proxy[scheme]), str(path)))
    return settings


def channel_urls(names: list[str], alias: str) -> list[str]:
    """Turn channel names (as .condarc lists them) into the URLs conda would fetch."""
    urls = []
    for name in names or ["conda-forge"]:
        if name == "defaults":
            urls.append("https://repo.anaconda.com/pkgs/main")
        elif "://" in name:
            urls.append(name.rstrip("/"))
        elif name.startswith(("/", ".")) or (len(name) > 1 and name[1] == ":"):
            continue  # a local channel: nothing to reach over the network
        else:
            urls.append(f"{alias.rstrip('/')}/{name}")
    return list(dict.fromkeys(urls))


def gather_network(env: Mapping[str, str], home: Path, prefix: Path | None) -> NetworkFacts:
    facts = NetworkFacts(env=_relevant_env(env))
    channel_names: list[str] = []
    for path in condarc_paths(env, home, prefix):
        if path.is_file():
            settings, channels = _read_condarc(path)
            facts.settings += settings
            channel_names = channels or channel_names
    for path in pip_config_paths(env, home, prefix):
        if path.is_file():
            facts.settings += _read_pip_config(path)
    for path in rattler_config_paths(home):
        if path.is_file():
            facts.settings += _read_rattler_config(path)
    alias = next(
        (s.value for s in reversed(facts.settings) if s.key == "conda.channel_alias"), DEFAULT_CHANNEL_ALIAS
    )
    facts.channels = channel_urls(channel_names, alias)
    facts.files = inspect_ca_files(facts)
    return facts


def _what_is_at(value: str) -> str:
    path = Path(value).expanduser()
    if not path.exists():
        return "missing"
    if path.is_dir():
        return "folder"
    return "pem" if _looks_like_pem(path) else "not-pem"


def inspect_ca_files(facts: NetworkFacts) -> dict[str, str]:
    """What is at each CA path the settings name (and at SSL_CERT_DIR): the checks only read this."""
    values = [value for _, value, _ in _ca_file_settings(facts)]
    values += [v for v in (facts.env.get("SSL_CERT_DIR"), facts.env.get("ssl_cert_dir")) if v]
    return {value: _what_is_at(value) for value in dict.fromkeys(values)}


def probe_url_problem(url: str) -> str:
    """Why a --probe-url value cannot be probed ("" when it can)."""
    if any("\udc80" <= c <= "\udcff" for c in url):  # argv bytes that were not UTF-8
        return "it is not a URL (it has bytes that are not UTF-8 text)"
    try:
        parsed = urllib.parse.urlsplit(url)
        parsed.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as exc:
        return f"it is not a URL ({exc})"
    if parsed.scheme not in ("http", "https"):
        return "it is not an http:// or https:// URL"
    if not parsed.hostname:
        return "it has no host name"
    return ""


def probe_url(url: str, timeout: float) -> ProbeResult:
    """One HEAD request through the proxies the environment names; any HTTP answer means reachable."""
    problem = probe_url_problem(url)
    if problem:
        return ProbeResult(url, False, f"not probed: {problem}")
    opener = urllib.request.build_opener()  # a fresh opener reads the proxy variables as they are now
    try:
        request = urllib.request.Request(url, method="HEAD", headers={"User-Agent": "solver-doctor"})
        with opener.open(request, timeout=timeout) as response:
            return ProbeResult(url, True, f"HTTP {response.status}")
    except urllib.error.HTTPError as exc:
        # 404 means the server answered but the channel or subdir is not there.
        return ProbeResult(
            url, exc.code in (401, 403, 405) or exc.code < 400, f"HTTP {exc.code} {exc.reason}"
        )
    except urllib.error.URLError as exc:
        return ProbeResult(url, False, _reason_text(exc.reason))
    except (OSError, ValueError, ssl.SSLError, http.client.HTTPException) as exc:
        return ProbeResult(url, False, _reason_text(exc))


def _reason_text(reason: object) -> str:
    if isinstance(reason, ssl.SSLCertVerificationError):
        return f"CERTIFICATE_VERIFY_FAILED: {reason.verify_message}"
    return str(reason) or type(reason).__name__


def probe_targets(facts: NetworkFacts, extra_urls: list[str]) -> list[str]:
    """Each conda channel's noarch repodata, the pip index, and any URL given on the command line."""
    targets = [f"{url}/noarch/repodata.json" for url in facts.channels]
    pip_index = facts.env.get("PIP_INDEX_URL") or next(
        (s.value for s in reversed(facts.settings) if s.key == "pip.index-url"), DEFAULT_PIP_INDEX
    )
    targets.append(pip_index.rstrip("/") + "/")
    targets += extra_urls
    return list(dict.fromkeys(targets))


def run_probes(facts: NetworkFacts, extra_urls: list[str], timeout: float = 5.0) -> list[ProbeResult]:
    """Probe every target at once. The socket timeout does not cover the DNS lookup, so each probe
    runs in a thread and is given up (as "no answer") when it has not finished in time."""
    import threading

    targets = probe_targets(facts, extra_urls)
    results: dict[str, ProbeResult] = {}

    def probe(url: str) -> None:
        results[url] = probe_url(url, timeout)

    threads = [threading.Thread(target=probe, args=(url,), daemon=True, name="probe") for url in targets]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout + 2.0
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return [
        results.get(url)
        or ProbeResult(url, False, f"no answer within {timeout:g} s (name lookup or connection hangs)")
        for url in targets
    ]


# ---------------------------------------------------------------- checks


def _ca_file_settings(facts: NetworkFacts) -> list[tuple[str, str, str]]:
    """(where it is set, the CA file path, how to undo it) for every place a CA bundle is configured."""
    found = [
        (name, value, f"unset {name}")
        for name, value in facts.env.items()
        if name.upper() in CA_FILE_VARIABLES
    ]
    for setting in facts.settings:
        if setting.key == "pip.cert":
            found.append((f"pip cert in {setting.source}", setting.value, f"remove it from {setting.source}"))
        elif setting.key == "conda.ssl_verify" and setting.value.lower() not in ("true", *FALSE_WORDS):
            found.append(
                (f"conda ssl_verify in {setting.source}", setting.value, "conda config --set ssl_verify true")
            )
    return found


def _looks_like_pem(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return b"-----BEGIN CERTIFICATE-----" in handle.read(4 << 20)
    except OSError:
        return False


def _usable_bundle(facts: NetworkFacts, value: str) -> bool:
    return facts.files.get(value) == "pem"


def check_ca_files(facts: NetworkFacts) -> list[Finding]:
    findings, good = [], []
    for where, value, undo in _ca_file_settings(facts):
        kind = facts.files.get(value, "missing")
        evidence = f"{where}: {value}"
        if kind == "missing":
            findings.append(
                failed(
                    "tls.ca-file",
                    f"{where} names a CA bundle that does not exist",
                    evidence,
                    f"point it at your organisation's CA bundle (PEM), or {undo}",
                )
            )
        elif kind == "folder":
            findings.append(
                failed(
                    "tls.ca-file",
                    f"{where} names a folder, not a CA bundle file",
                    evidence,
                    f"point it at a PEM file (a folder belongs in SSL_CERT_DIR), or {undo}",
                )
            )
        elif kind == "not-pem":
            findings.append(
                failed(
                    "tls.ca-file",
                    f"{where} names a file with no PEM certificate in it",
                    evidence,
                    "export the CA in PEM format (-----BEGIN CERTIFICATE-----) and point it there",
                )
            )
        else:
            good.append(evidence)
    cert_dir = facts.env.get("SSL_CERT_DIR") or facts.env.get("ssl_cert_dir")
    if cert_dir and facts.files.get(cert_dir) != "folder":
        findings.append(
            failed(
                "tls.ca-file",
                "SSL_CERT_DIR names a folder that does not exist",
                f"SSL_CERT_DIR: {cert_dir}",
                "point SSL_CERT_DIR at an existing folder, or unset it",
            )
        )
    if good:
        findings.append(
            passed(
                "tls.ca-file", f"{len(good)} CA bundle setting(s) name readable PEM files", "; ".join(good)
            )
        )
    return findings


def check_verification_disabled(facts: NetworkFacts) -> list[Finding]:
    offenders = []
    for setting in facts.settings:
        if setting.key == "conda.ssl_verify" and setting.value.lower() in FALSE_WORDS:
            offenders.append(f"conda ssl_verify: {setting.value} ({setting.source})")
        elif setting.key == "pip.trusted-host":
            offenders.append(f"pip trusted-host = {setting.value} ({setting.source})")
        elif setting.key == "rattler.tls-no-verify" and setting.value == "true":
            offenders.append(f"tls-no-verify = true ({setting.source})")
    for name in ("CONDA_SSL_VERIFY", "PYTHONHTTPSVERIFY", "PIP_TRUSTED_HOST"):
        value = facts.env.get(name)
        if value and (name == "PIP_TRUSTED_HOST" or value.lower() in FALSE_WORDS):
            offenders.append(f"{name}={value}")
    if not offenders:
        return []
    return [
        warned(
            "tls.verification",
            "certificate verification is turned off for some tools",
            "; ".join(offenders),
            "export SSL_CERT_FILE=<your CA bundle .pem> and turn verification back on "
            "(conda config --set ssl_verify true; drop trusted-host / tls-no-verify)",
        )
    ]


def check_ca_agreement(facts: NetworkFacts) -> list[Finding]:
    """A CA known to conda or pip but not in SSL_CERT_FILE fails only in rattler-based tools, and vice versa."""
    settings = _ca_file_settings(facts)
    if not settings:
        return []
    ssl_cert_file = facts.env.get("SSL_CERT_FILE") or facts.env.get("ssl_cert_file")
    bundles = {os.path.normcase(os.path.abspath(os.path.expanduser(v))) for _, v, _ in settings}
    evidence = "; ".join(f"{where}: {value}" for where, value, _ in settings)
    # Only a file that exists and holds PEM certificates may be suggested (tls.ca-file fails the others).
    usable = [value for _, value, _ in settings if _usable_bundle(facts, value)]
    if not ssl_cert_file:
        fix = (
            f"export SSL_CERT_FILE={usable[0]}"
            if usable
            else "get your organisation's CA bundle (PEM) first (see tls.ca-file), then export SSL_CERT_FILE=<that file>"
        )
        return [
            warned(
                "tls.ca-agreement",
                "a CA bundle is set for conda/pip only; rattler-based tools (pixi, uv, solver) read SSL_CERT_FILE",
                evidence,
                fix,
            )
        ]
    if len(bundles) > 1:
        if _usable_bundle(facts, ssl_cert_file):
            fix = (
                "use one bundle that holds every CA you need and point all of them at it (e.g. export "
                f"REQUESTS_CA_BUNDLE={ssl_cert_file} and conda config --set ssl_verify {ssl_cert_file})"
            )
        else:
            fix = (
                "make one PEM bundle that holds every CA you need (SSL_CERT_FILE does not name one, see "
                "tls.ca-file) and point SSL_CERT_FILE, REQUESTS_CA_BUNDLE and conda's ssl_verify at it"
            )
        return [warned("tls.ca-agreement", "tools are configured with different CA bundles", evidence, fix)]
    return [passed("tls.ca-agreement", "every tool uses the same CA bundle", next(iter(bundles)))]


def _proxy_settings(facts: NetworkFacts) -> list[tuple[str, str]]:
    found = [
        (name, value) for name, value in facts.env.items() if name.upper() in PROXY_VARIABLES + ("PIP_PROXY",)
    ]
    for setting in facts.settings:
        if ".proxy" in setting.key:
            found.append((f"{setting.key} ({setting.source})", setting.value))
    return found


def _proxy_url_problem(value: str) -> str:
    parsed = urllib.parse.urlsplit(value if "://" in value else "")
    if "://" not in value:
        return "has no scheme (write http://host:port)"
    if parsed.scheme not in ("http", "https", "socks5", "socks5h"):
        return f"uses scheme {parsed.scheme!r}; proxies are http://, https:// or socks5://"
    try:
        parsed.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        return "has an invalid port"
    if not parsed.hostname:
        return "has no host name"
    return ""


def check_proxies(facts: NetworkFacts) -> list[Finding]:
    proxies = _proxy_settings(facts)
    if not proxies:
        return []
    findings = []
    for where, value in proxies:
        problem = _proxy_url_problem(value)
        if problem:
            findings.append(
                failed(
                    "proxy.url",
                    f"the proxy in {where} {problem}",
                    f"{where}={value}",
                    "set it to the full proxy URL, e.g. http://proxy.example.com:3128",
                )
            )
    for name in PROXY_VARIABLES:
        upper, lower = facts.env.get(name), facts.env.get(name.lower())
        if upper and lower and upper != lower:
            findings.append(
                warned(
                    "proxy.case",
                    f"{name} and {name.lower()} disagree; tools differ in which one they read",
                    f"{name}={upper}; {name.lower()}={lower}",
                    f"set both to the same URL (export {name.lower()}=${name})",
                )
            )
    env_has_proxy = any(facts.env.get(n) for n in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"))
    conda_only = [f"{w}={v}" for w, v in proxies if w.startswith("conda.proxy_servers")]
    if conda_only and not env_has_proxy:
        url = next(v for w, v in proxies if w.startswith("conda.proxy_servers"))
        findings.append(
            warned(
                "proxy.conda-only",
                "a proxy is set in .condarc only; pip and rattler-based tools do not read it",
                "; ".join(conda_only),
                f"export HTTPS_PROXY={url} HTTP_PROXY={url}",
            )
        )
    if not findings:
        findings.append(
            passed("proxy.url", "proxy settings are well-formed", "; ".join(f"{w}={v}" for w, v in proxies))
        )
    return findings


def check_probes(facts: NetworkFacts) -> list[Finding]:
    if facts.probes is None:
        return [
            info(
                "network.probe",
                "channel connectivity not probed",
                "",
                "run `solver doctor --probe` to try each configured channel",
            )
        ]
    findings = []
    proxies = _proxy_settings(facts)
    for probe in facts.probes:
        if probe.ok:
            findings.append(passed("network.probe", f"{probe.url} is reachable", probe.detail))
            continue
        detail = probe.detail
        if "CERTIFICATE_VERIFY_FAILED" in detail or "certificate" in detail.lower():
            fix = "export SSL_CERT_FILE=<your organisation's CA bundle .pem> (ask IT for the proxy's root CA)"
        elif detail.startswith("HTTP 404"):
            fix = "the server has no such channel or subdir: check the channel name and channel_alias in .condarc"
        elif proxies:
            fix = f"the proxy ({proxies[0][1]}) did not get through: check it is right and running, or set NO_PROXY"
        else:
            fix = "no proxy is set: if this network needs one, export HTTPS_PROXY=http://<proxy>:<port>"
        findings.append(failed("network.probe", f"{probe.url} could not be reached", detail, fix))
    return findings


def check_network(facts: Facts, kb=None) -> list[Finding]:
    return network_findings(facts.network)


def network_findings(facts: NetworkFacts) -> list[Finding]:
    findings = (
        check_ca_files(facts)
        + check_verification_disabled(facts)
        + check_ca_agreement(facts)
        + check_proxies(facts)
    )
    for setting in facts.settings:
        if setting.key.endswith(".unreadable"):
            findings.append(
                warned(
                    "config.unreadable",
                    f"{setting.source} could not be parsed",
                    setting.value,
                    f"fix the syntax of {setting.source}",
                )
            )
    if not findings:
        findings.append(
            passed(
                "tls.settings",
                "no proxy or custom CA configured; the system trust store is used",
                f"python {sys.version.split()[0]}, {ssl.OPENSSL_VERSION}",
            )
        )
    return findings + check_probes(facts)
