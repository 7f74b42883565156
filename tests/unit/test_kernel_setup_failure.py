"""The message of a failed kernel install step keeps the lines that say why (found in CI: uv's hash mismatch lists
every expected hash of the requirement, dozens of lines, which pushed "Hash mismatch" out of the message's tail)."""

from __future__ import annotations

from eukhe.kernel.bootstrap.errors import collapse_hash_lines, format_setup_failure


def test_a_hash_mismatch_with_many_expected_hashes_keeps_its_cause_in_the_message() -> None:
    expected = [f"    sha256:{n:064x}" for n in range(40)]
    output = "\n".join(
        [
            "Resolved 12 packages in 3ms",
            "error: Failed to install: msgspec-0.19.0-cp311-cp311-manylinux_2_17_x86_64.whl (msgspec==0.19.0)",
            "  Caused by: Hash mismatch for `msgspec==0.19.0`",
            "",
            "Expected:",
            *expected,
            "",
            "Computed:",
            "  sha256:" + "2e" * 32,
        ]
    )
    message = format_setup_failure("lock_install", 1, output)
    assert message.startswith("kernel install failed at step lock_install (exit 1)")
    assert "Hash mismatch for `msgspec==0.19.0`" in message
    assert "(38 more hashes)" in message
    assert message.endswith("sha256:" + "2e" * 32)


def test_a_short_run_of_hashes_is_kept_whole() -> None:
    lines = ["a", "  sha256:1", "  sha256:2", "b"]
    assert collapse_hash_lines(lines) == lines
    assert collapse_hash_lines([*lines[:3], "  sha256:3"]) == ["a", "  sha256:1", "  sha256:2", "  ... (1 more hash)"]
