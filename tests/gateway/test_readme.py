"""The Python example of docs/cosmos.md "Use your Cosmos DB SDK", run as written against a node of the test cluster,
so the manual stays true."""
import os
import subprocess
import sys

README = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "cosmos.md")


def readme_example():
    text = open(README, encoding="utf-8").read()
    section = text[text.index("## Use your Cosmos DB SDK"):]
    start = section.index("```python\n") + len("```python\n")
    return section[start:section.index("```\n", start)]


def test_readme_example_runs(cluster):
    env = dict(os.environ, COSMOS_URL=cluster.url(3), COSMOS_KEY=cluster.cosmos_key("readwrite"))
    run = subprocess.run([sys.executable, "-c", readme_example()], env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "[3]", run.stdout
    assert lines[1] == "c2 expired", run.stdout
    assert lines[2].startswith("400 (BadRequest) The input ttl '0' is invalid."), run.stdout
