"""docs/deployment.md as written: its systemd units pass `systemd-analyze verify` and can be
enabled, and its nginx configuration, run by Debian's nginx in front of a served instance with
GOVERNOR_HTTPS=1, serves the service over TLS and redirects plain HTTP."""

from __future__ import annotations

import datetime
import re
import ssl
import subprocess
import time
from pathlib import Path

import httpx
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.live import ROOT, free_port, live_server, stop_process_group

DOC = (ROOT / "docs" / "deployment.md").read_text()


def blocks(language: str, section: str) -> list[str]:
    text = DOC[DOC.index(section):]
    text = text[:text.index("\n## ", 1)]
    return re.findall(rf"```{language}\n(.*?)```", text, re.DOTALL)


def test_the_systemd_units_verify_and_can_be_enabled(tmp_path: Path) -> None:
    env_file = tmp_path / "env"
    env_file.write_text("GOVERNOR_VAR_DIR=/var/lib/governor\n")
    units = []
    for block in blocks("ini", "## Example systemd units"):
        name = re.match(r"# /etc/systemd/system/(\S+)", block)
        assert name is not None, block
        assert "\n[Install]\nWantedBy=multi-user.target\n" in block, f"{name[1]}: not enableable"
        unit = tmp_path / name[1].replace("@.service", "@1.service")
        unit.write_text(block.replace("/opt/governor", str(ROOT))
                        .replace("/etc/governor/env", str(env_file)))
        units.append(unit)
    assert [unit.name for unit in units] == ["governor-web.service", "governor-worker@1.service",
                                             "governor-beat.service"]
    result = subprocess.run(["systemd-analyze", "verify", *map(str, units)],  # noqa: S603, S607
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stderr == "", result.stderr


def self_signed(directory: Path, name: str) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]),
                                  critical=False)
                   .sign(key, hashes.SHA256()))
    cert, private = directory / "fullchain.pem", directory / "privkey.pem"
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                          serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    return cert, private


def test_the_nginx_configuration_serves_it_over_tls(tmp_path: Path) -> None:
    [config] = blocks("nginx", "## Connections and the reverse proxy")
    https_port, http_port = free_port(), free_port()
    name = "governor.example.com"
    cert, key = self_signed(tmp_path, name)
    public = f"https://{name}:{https_port}"
    served = {"GOVERNOR_HTTPS": "1", "ALLOWED_HOSTS": f"{name},127.0.0.1",
              "GOVERNOR_PUBLIC_URL": public, "CSRF_TRUSTED_ORIGINS": public}
    with live_server(tmp_path, extra_env=served) as live:
        upstream = live.url.removeprefix("http://")
        config = re.sub(r"    server 10\.0\.0\.11:8000;.*\n    server 10\.0\.0\.12:8000;\n",
                        f"    server {upstream};\n", config)
        config = (config.replace("listen 80;", f"listen 127.0.0.1:{http_port};")
                  .replace("listen 443 ssl http2;", f"listen 127.0.0.1:{https_port} ssl http2;")
                  .replace(f"/etc/letsencrypt/live/{name}/fullchain.pem", str(cert))
                  .replace(f"/etc/letsencrypt/live/{name}/privkey.pem", str(key)))
        assert f"server {upstream};" in config and str(cert) in config
        (tmp_path / "nginx.conf").write_text(
            f"pid {tmp_path}/nginx.pid;\nerror_log {tmp_path}/error.log;\n"
            f"events {{}}\nhttp {{\naccess_log off;\n{config}}}\n")
        nginx = subprocess.Popen(  # noqa: S603
            ["/usr/sbin/nginx", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf"),
             "-g", "daemon off;"], start_new_session=True,
            stderr=subprocess.PIPE, text=True)
        try:
            transport = httpx.HTTPTransport(verify=ssl.create_default_context(cafile=str(cert)))
            with httpx.Client(transport=transport, timeout=10) as client:
                for _ in range(50):
                    try:
                        health = client.get(f"https://127.0.0.1:{https_port}/healthz",
                                            headers={"Host": name}, extensions={
                                                "sni_hostname": name})
                        break
                    except httpx.ConnectError:
                        if nginx.poll() is not None:
                            raise AssertionError(nginx.stderr.read() if nginx.stderr
                                                 else "") from None
                        time.sleep(0.1)
                assert health.status_code == 200, health.text
                assert health.headers["strict-transport-security"].startswith("max-age=")
                plain = client.get(f"http://127.0.0.1:{http_port}/reviews/",
                                   headers={"Host": name})
                assert plain.status_code == 301
                assert plain.headers["location"] == f"https://{name}/reviews/"
                login = client.get(f"https://127.0.0.1:{https_port}/accounts/login/",
                                   headers={"Host": name}, extensions={"sni_hostname": name})
                assert login.status_code == 200
                assert "secure" in login.headers.get("set-cookie", "").lower()
        finally:
            stop_process_group(nginx)
