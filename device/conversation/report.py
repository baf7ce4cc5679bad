"""Turn records as the JSON and tables that `demo` and `bench turn` print."""

from __future__ import annotations

from engines.model_specs import SPEECH_RATE

from device.conversation.turn import Turn

STAGES = ("endpoint", "asr", "dialogue", "first_chunk", "first_audio", "processing", "turn")


def turn_report(turn: Turn) -> dict:
    answer = turn.answer
    return {
        "turn": turn.id,
        "transcript": turn.transcript,
        "intent": answer.intent if answer else None,
        "about": answer.about or None if answer else None,  # of an ask-back: the intent it guessed
        "score": round(answer.score, 3) if answer else None,
        "source": answer.source if answer else None,
        "answer": answer.spoken if answer else None,
        "ignored": turn.ignored or None,
        "interrupted": turn.interrupted,
        "barged_in": turn.barged_in,  # heard over a reply, which it paused
        "rejoined": turn.rejoined,  # it went on with the turn before: its transcript is the whole question
        "played_s": turn.played_s,  # of the reply, when it was cut
        "unsaid": turn.unsaid or None,  # what the cut reply did not get to say ("repeat that" says it)
        "utterance_s": round(turn.utterance.seconds, 3),
        "speculative_asr_hit": turn.timings.speculative_hit,
        "reply_chunks": len(turn.chunks),
        "reply_s": round(sum(len(c.audio) for c in turn.chunks) / turn.chunks[0].sample_rate, 3)
        if turn.chunks
        else 0.0,
        "visemes": [[v.sample, v.shape] for c in turn.chunks for v in c.visemes],
        "ms": turn.timings.stages_ms(),
        "llm_first_token_ms": answer.reply.first_token_ms if answer and answer.reply else None,
        "end_of_turn": _end_of_turn(turn),
    }


def _end_of_turn(turn: Turn) -> dict:
    """The end-of-turn model's verdict on the pause that ended the turn, what its words were (open,
    a known question, other; None if not judged), and the silence waited."""
    verdict, utterance = turn.end_of_turn, turn.utterance
    return {
        "words": None if turn.pause_words is None else turn.pause_words.value,
        "verdict": None if verdict is None else "complete" if verdict.complete else "incomplete",
        "probability": None if verdict is None else round(verdict.probability, 3),
        "cost_ms": None if verdict is None else verdict.cost_ms,
        "hangover_ms": round((utterance.decided - utterance.speech_end) / SPEECH_RATE * 1000, 1)
        if utterance.decided
        else None,
    }


def print_turn_table(turns: list[dict], expected: list[str] | None = None) -> None:
    print(f"{'#':>2} {'heard':<40} {'intent':<15} " + " ".join(f"{s:>11}" for s in STAGES))
    for i, t in enumerate(turns):
        intent = f"({t['ignored']})" if t["ignored"] else t["intent"] or "-"
        if expected and i < len(expected) and expected[i] and t["intent"] != expected[i]:
            intent += f" (expected {expected[i]})"
        cells = " ".join(f"{'-' if t['ms'][s] is None else t['ms'][s]:>11}" for s in STAGES)
        print(f"{t['turn']:>2} {t['transcript'][:40]:<40} {intent:<15} {cells}")
    print(
        "ms: endpoint = last speech sample -> endpoint decided (the hangover); processing = endpoint -> "
        "first reply sample at the speaker; turn = last speech sample -> first reply sample"
    )
