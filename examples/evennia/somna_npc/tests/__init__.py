"""Tests of somna_npc, run by Evennia's test runner against a real `somna run --serve`:

    evennia test --settings settings.py somna_npc

(from a game dir where `somna_npc` is importable; `$SOMNA_BIN` names the somna binary).
scripts/test-evennia.sh at the repository's root does it all.
"""
