"""REPORT.md and claims.json are assembled from the notebooks' results.json files."""
import json

from icl.reproduce import write_report


def claim(cid, figure):
    return {"id": cid, "claim": f"claim {cid}", "criterion": "x < 1", "status": "partly reproduced",
            "measured": {"x": 0.123456}, "figure": figure}


def test_report_orders_claims_and_flags_missing_figures(tmp_path):
    base = tmp_path / "outputs" / "ci"
    for name, claims in {"01_easy_linear": [claim("C10", "outputs/ci/01_easy_linear/a.png")],
                         "03_difficult": [claim("C6b", "outputs/ci/03_difficult/b.png"),
                                          claim("C6a", "outputs/ci/03_difficult/gone.png")]}.items():
        (base / name).mkdir(parents=True)
        (base / name / "results.json").write_text(json.dumps({"claims": claims}))
    (base / "01_easy_linear" / "a.png").write_bytes(b"png")
    (base / "03_difficult" / "b.png").write_bytes(b"png")

    text = write_report(tmp_path, "ci").read_text()

    ids = [row["id"] for row in json.loads((base / "claims.json").read_text())]
    assert ids == ["C6a", "C6b", "C10"]
    assert "[a.png](01_easy_linear/a.png)" in text and "[b.png](03_difficult/b.png)" in text
    assert "gone.png (missing" in text and "(03_difficult/gone.png)" not in text
    assert "x = 0.123" in text
