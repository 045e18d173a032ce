"""Fixtures for end-to-end tests: one generated model and one server for the session."""
import pytest

from server import Server, make_model


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory):
    return make_model(tmp_path_factory.mktemp("e2e") / "tiny-v3")


@pytest.fixture(scope="session")
def server(deepinfer_bin, model_dir):
    s = Server(deepinfer_bin, model_dir, "--max-body-bytes", str(1 << 20), "--max-header-bytes", "8192",
               "--read-timeout", "3")
    yield s
    assert s.stop() == 0, "".join(s.log)


@pytest.fixture(scope="session")
def client(server):
    import openai
    return openai.OpenAI(base_url=server.base + "/v1", api_key="unused", max_retries=0, timeout=120)
