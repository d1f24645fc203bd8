"""The rules of the reference's prompts (NLP2CT/NCP-Bench, commit 780aeb5), as facts in our words, and
the phrase of our own prompt that carries each one.

Without `ncp.reference` the platform sends its own, shorter prompts; they must still carry every
rule the authors' prompts give the model, because those rules decide the verdicts. Each entry:
rule id, the prompt roles that need it, the rule, and a phrase that must appear in the system
text of each of those prompts (tests/ncp/test_prompt_rules.py checks every entry).
"""
from __future__ import annotations

from typing import NamedTuple

CONFLICT = ("ncp.conflict_check", "ncp.conflict_double_check")
NARRATORS = ("ncp.narrator", "ncp.memory_hiagent")


class Rule(NamedTuple):
    id: str
    roles: tuple[str, ...]
    rule: str
    phrase: str


RULES: tuple[Rule, ...] = (
    # ---- conflict check and double-check (the review applies the same standards) ----
    Rule("fact.priority", CONFLICT, "A clear contradiction of established facts is a fact conflict, first of all.",
         "Highest priority: when the response already contradicts something the story established"),
    Rule("fact.latest_state", CONFLICT, "The latest state shown by earlier narration binds unless changed "
         "explicitly; newer narration outranks an older fact entry.", "the more recent narration is the reference"),
    Rule("fact.snapshot", CONFLICT, "Pre-turn facts are a starting snapshot; the response may change the world.",
         "not a promise that they still hold after the response"),
    Rule("fact.active_constrains", CONFLICT, "A fact the response does not negate still constrains the turn's end.",
         "An active fact the response does not clearly negate or replace still limits"),
    Rule("fact.key_change", CONFLICT, "A brief explicit bridge suffices; an unestablished key change is a conflict; "
         "no implied bridge.", "Never supply an implied bridge"),
    Rule("fact.sensitive_attributes", CONFLICT, "Perception, memory, speech, mobility, control, access, awareness "
         "are high-sensitivity continuity attributes.", "Perception, memory, speech, movement, control, access and "
         "awareness are high-sensitivity"),
    Rule("fact.ongoing_condition", CONFLICT, "An ongoing limitation shown earlier must be respected unless ended.",
         "An ongoing condition, limitation or loss of capacity shown earlier must be respected"),
    Rule("fact.player_assertion", CONFLICT, "The player's input or assumption does not change the world state.",
         "a player speaking as if a condition had ended is no evidence that it did"),
    Rule("fact.player_pushed_reversal", CONFLICT, "Reversing shown state because the player pushed is a fact "
         "conflict, also when it contradicts earlier narration.", "that contradicts the earlier narration even "
         "when following the player"),
    Rule("fact.candidate_updates", CONFLICT, "Candidate fact updates are a reading aid only; a poor extraction is "
         "not a conflict.", "a poor extraction is not a conflict"),
    Rule("commitment.priority", CONFLICT, "A story direction that can no longer support a commitment is a "
         "commitment conflict now.", "can no longer support a commitment's eventual validity"),
    Rule("commitment.own_text", CONFLICT, "Each commitment is judged by its own exact violation condition.",
         "Judge each commitment against its own text and exact violation condition"),
    Rule("commitment.ordering", CONFLICT, "Ordering: skipped prerequisites, jumping ahead, or the violation "
         "condition before prior steps.", "ordering: only if the response skips required prerequisites"),
    Rule("commitment.invariant", CONFLICT, "Invariant: its violation condition or an explicit equivalent; no extra "
         "phase rules.", "invent no extra phase rules"),
    Rule("commitment.achievement_violation", CONFLICT, "Achievement: a conflict when its violation condition is "
         "triggered, or its satisfaction made impossible; not a setback.", "achievement: if the response triggers "
         "the violation condition"),
    Rule("commitment.satisfied_ordering", CONFLICT, "A satisfied ordering commitment is not re-opened for a "
         "compressed transition.", "An ordering commitment already marked satisfied is not re-opened"),
    Rule("commitment.no_rescue", CONFLICT, "A triggered violation stands despite partial progress or future "
         "possibilities.", "vague future possibilities do not rescue it"),
    Rule("commitment.planning", CONFLICT, "Plans, fears or preparation are not violations unless stated.",
         "Plans, fears, suspicions, realisations or preparation are not a violation"),
    Rule("commitment.later_node_part", CONFLICT, "Reaching the later part of the current node is not a violation.",
         "Reaching the later part of the current node or its immediate aftermath is not a violation"),
    Rule("commitment.pending_nodes", CONFLICT, "Pending trajectory nodes have not happened.",
         "pending nodes have not happened"),
    Rule("commitment.too_fast", CONFLICT, "Too far or too fast is a commitment conflict rather than a fact one.",
         "is a commitment conflict rather than a fact conflict"),
    Rule("input.explicit_limits", CONFLICT, "Identify the attempted move and explicit limits; no hidden agenda.",
         "infer no hidden agenda"),
    Rule("input.friction_ok", CONFLICT, "Registering the move and answering with friction handles the input; "
         "unmet demands are fine.", "leaving literal demands unmet"),
    Rule("input.conflict_cases", CONFLICT, "Input conflict only when ignored, replaced, misnarrated, token, or an "
         "explicit action/limit contradicted.", "gives token acknowledgement with no in-world follow-through"),
    Rule("input.self_limit", CONFLICT, "Silently overriding a player's stated self-limit is a conflict.",
         "silently overriding the limit and completing the later move is a conflict"),
    Rule("general.present_turn_finality", CONFLICT, "Judge the response as written now; no later repair excuses "
         "it; invent nothing.", "Present-turn finality"),
    Rule("general.clear_mismatch_bias", CONFLICT, "On a clear mismatch, record the conflict rather than a "
         "charitable reading.", "Conflict bias for a clear mismatch"),
    Rule("general.node_consistent", CONFLICT, "Node-consistent advancement is not a conflict for compressed "
         "wording.", "Node-consistent advance"),
    Rule("general.no_prediction", CONFLICT, "Early events conflict only when they break a rule.", "No prediction"),
    Rule("general.minimal", CONFLICT, "Smallest non-redundant set of conflicts.", "smallest non-redundant set"),
    Rule("general.ids", CONFLICT, "Use the violated id; 'input' for player input; 'response_internal' for "
         "internal contradictions.", '"response_internal"'),
    # ---- double-check only ----
    Rule("review.claims_only", ("ncp.conflict_double_check",), "Review only the claimed conflicts; add none.",
         "Review only the conflicts it claims; do not add unrelated new ones"),
    Rule("review.not_softer", ("ncp.conflict_double_check",), "A correction pass, not a softer pass.",
         "This is a correction pass, not a softer pass"),
    Rule("review.exact_reason", ("ncp.conflict_double_check",), "A failed reason is overturned, not rescued with "
         "another rationale.", "rather than rescuing it with a different rationale"),
    Rule("review.false_positive_filter", ("ncp.conflict_double_check",), "Overturn claims on a covered bridge, "
         "planning/proximity, or missing compliance.", "Overturn a claim that rests only on a missing bridge detail"),
    Rule("review.confirm_clear", ("ncp.conflict_double_check",), "Confirm a clear contradiction despite partial "
         "engagement.", "Confirm a claim when the response already contains a clear contradiction"),
    Rule("review.final_decision", ("ncp.conflict_double_check",), "Nothing survives: confirmed false and no "
         "conflicts; else confirmed true with the survivors.", 'set "confirmed" to false and return no conflicts'),
    # ---- fact update ----
    Rule("facts.smallest_diff", ("ncp.fact_update",), "The smallest strict diff; a ledger, not an archive.",
         "smallest strict diff"),
    Rule("facts.end_of_response", ("ncp.fact_update",), "Add only what is true at the end of the response.",
         "it is true at the end of the narration"),
    Rule("facts.direct_support", ("ncp.fact_update",), "No strengthening or inference.",
         "no strengthening, diagnosing, generalising or inferring"),
    Rule("facts.durable", ("ncp.fact_update",), "Durable state only; a location change once arrived.",
         "a change of place counts only once someone has arrived"),
    Rule("facts.no_past_beat", ("ncp.fact_update",), "No logging of past beats; record the lasting consequence.",
         "not merely that something happened earlier in the turn"),
    Rule("facts.atomic_novel", ("ncp.fact_update",), "Atomic and new, no paraphrase.", "not a paraphrase of one"),
    Rule("facts.negate_conditions", ("ncp.fact_update",), "Negate only a specific listed fact, ended, shown, "
         "necessary.", "if the old fact can stand beside the new state, keep it"),
    Rule("facts.no_unstated_expiry", ("ncp.fact_update",), "Silence or shifted focus is no negation.",
         "silence, a change of focus or a fact feeling less central is not enough"),
    Rule("facts.continuation", ("ncp.fact_update",), "Ongoing conditions are presumed to continue.",
         "An ongoing condition that could still hold after the narration stays"),
    Rule("facts.no_successor_needed", ("ncp.fact_update",), "A negation needs no replacement fact.",
         "A fact may be negated without a replacement fact"),
    Rule("facts.minimal_negation", ("ncp.fact_update",), "No cluster cleanup; no scope collapse.",
         "no negating a broader fact because a narrower"),
    Rule("facts.scene_drift", ("ncp.fact_update",), "Staging, viewpoint or posture is not a ledger change.",
         "Temporary staging, viewpoint, posture"),
    Rule("facts.default_bias", ("ncp.fact_update",), "When uncertain, neither add nor negate.",
         "When unsure, do not add; when unsure, do not negate"),
    Rule("facts.leaps", ("ncp.fact_update",), "No process-to-outcome, dialogue-to-fact or identity leaps.",
         "do not turn what a character says or believes into an objective fact"),
    Rule("facts.no_new_ids", ("ncp.fact_update",), "No new fact ids.", "Write no new ids"),
    # ---- node check ----
    Rule("node.separate", ("ncp.node_update",), "Trigger and delta are judged separately and need not agree.",
         "do not force them to agree"),
    Rule("node.player_lines", ("ncp.node_update", "ncp.commitment_status"), "Player lines are in-world moves, not "
         "instructions.", "not instructions"),
    Rule("node.real_occurrence", ("ncp.node_update",), "Intentions, foreshadowing or atmosphere do not count.",
         "Intentions, plans, suspicions, preparation, matching atmosphere"),
    Rule("node.ambiguous_false", ("ncp.node_update",), "Ambiguous evidence means false.",
         "If the evidence stays ambiguous, answer false"),
    Rule("node.discrete", ("ncp.node_update",), "One discrete step; no later node required.",
         "never require a later node"),
    Rule("node.no_unsupported_negatives", ("ncp.node_update",), "A false reason cites only present evidence; "
         "not-yet differs from contradicted.", 'Keep "not yet established" apart from "contradicted"'),
    # ---- commitment status ----
    Rule("status.own_condition", ("ncp.commitment_status",), "Judge against the satisfaction condition.",
         "Judge each commitment against its own satisfaction condition"),
    Rule("status.same_referents", ("ncp.commitment_status",), "Evidence must concern the condition's own "
         "referents; distinct events are not merged.", "count evidence only when it concerns those very referents"),
    Rule("status.narrow_words", ("ncp.commitment_status",), "Broad words are read narrowly.",
         "Read broad words in a condition"),
    Rule("status.map_not_record", ("ncp.commitment_status",), "The trajectory is a map, not a completion record.",
         "the trajectory is a map, not a record"),
    Rule("status.ordering_preceding_nodes", ("ncp.commitment_status",), "An ordering commitment is satisfied only "
         "after all preceding nodes are confirmed and evidenced.", "SATISFIED only when every preceding node is "
         "marked occurred"),
    Rule("status.open_interval", ("ncp.commitment_status",), "Open-interval commitments stay pending.",
         "having held so far is not enough"),
    Rule("status.revert", ("ncp.commitment_status",), "A satisfied commitment no longer established goes back to "
         "pending.", "a commitment marked satisfied before is no longer established"),
    Rule("status.two_statuses", ("ncp.commitment_status",), "Only SATISFIED and PENDING.",
         "Only two statuses exist"),
    # ---- narrators (baseline and HiAgent share the reference's method prompt) ----
    Rule("narrator.node_first", NARRATORS, "Advancing the current node is the first priority.",
         "First priority of every turn: move the current node forward"),
    Rule("narrator.advancement_over_fidelity", NARRATORS, "Advancement wins over fidelity to the player.",
         "choose advancement"),
    Rule("narrator.stages", NARRATORS, "Description, trigger, delta as gated stages.",
         "do not move on to a later stage while a material part of the open one"),
    Rule("narrator.semantic_coverage", NARRATORS, "A stage counts only when its specific content is legible.",
         "every element it names"),
    Rule("narrator.priority_order", NARRATORS, "Node, then commitments, then state (facts plus pending updates), "
         "then the player.", "Order of priorities"),
    Rule("narrator.pending_updates", NARRATORS, "Pending fact updates are part of the current state.",
         "already count as true"),
    Rule("narrator.first_sentence", NARRATORS, "The first sentence shows how the player's move lands.",
         "First sentence"),
    Rule("narrator.grounded_bridge", NARRATORS, "Bridge to the next stage through grounded developments.",
         "build a grounded bridge"),
    Rule("narrator.no_stagnation", NARRATORS, "No stagnation or loops; a decisive change after two stalled turns.",
         "No stagnation or loops"),
    Rule("narrator.friction", NARRATORS, "Friction instead of obedience.", "Friction instead of obedience"),
    Rule("narrator.no_plot_armour", NARRATORS, "The player may suffer proportionate consequences.", "no plot armour"),
    Rule("narrator.no_broad_compliance", NARRATORS, "Other characters act on their own motives.",
         "no clean obedience to a long chain of orders"),
    Rule("narrator.system_state", NARRATORS, "The player's wording cannot rewrite the shown state.",
         "The player's wording cannot rewrite the state"),
    Rule("narrator.no_repetition", NARRATORS, "Never repeat earlier narration.", "Never repeat, paraphrase or "
         "lightly reword earlier narration"),
    Rule("narrator.claims_not_tasks", NARRATORS, "Player input is a claim or attempt, not a task list; invented "
         "premises are not ratified.", "not an instruction or a task list"),
    Rule("narrator.contradictory_limits", NARRATORS, "Keep a player's explicit limit over a later move that breaks "
         "it.", "Contradictory player limits"),
    Rule("narrator.goal_level", NARRATORS, "Answer checklists and chains of demands at goal level.",
         "Goal-level response"),
    Rule("narrator.commitments_hidden", NARRATORS, "Commitments are obeyed, hidden, and no excuse to stall.",
         "never use them as an excuse to stall"),
    Rule("narrator.turn_scope", NARRATORS, "No scripting of future player choices.",
         "do not script the player's later choices"),
    Rule("narrator.original_arc", NARRATORS, "Prefer the original story's causal pull.",
         "closest to the original story"),
    Rule("narrator.veil", NARRATORS + ("ncp.narrator_opening",), "No hidden truths before their time; no meta-talk.",
         "never step outside the story world"),
    Rule("narrator.length", NARRATORS + ("ncp.narrator_opening",), "At most 150 words.", "at most 150 words"),
    # ---- opening ----
    Rule("opening.second_person", ("ncp.narrator_opening",), "Second person.", 'second person ("you")'),
    Rule("opening.no_player_move", ("ncp.narrator_opening",), "The player has not acted yet.",
         "the player has not spoken or acted yet"),
    Rule("opening.anchor", ("ncp.narrator_opening",), "Begin at the current node.",
         "Begin exactly where the current trajectory node places the story"),
    Rule("opening.milestones", ("ncp.narrator_opening",), "Nodes are milestones; no fast-forwarding.",
         "no fast-forwarding the story"),
    Rule("opening.commitments_hidden", ("ncp.narrator_opening",), "Commitments respected, never exposed.",
         "Respect the commitments but never reveal them"),
    Rule("opening.original_arc", ("ncp.narrator_opening",), "Lean toward the original work.",
         "lean toward the tone and situation of the original story"),
    # ---- players ----
    Rule("player.visible_only", ("ncp.player_adversarial", "ncp.player_natural"), "Only the visible history; no "
         "spoilers from knowing the source.", "ignore what you may know of the original story"),
    Rule("player.single_turn", ("ncp.player_adversarial", "ncp.player_natural"), "One input, no narrated outcome.",
         "do not narrate what happens"),
    Rule("player.no_repeat", ("ncp.player_adversarial", "ncp.player_natural"), "Never repeat the previous input.",
         "repeat your previous input"),
    Rule("player.input_style", ("ncp.player_adversarial", "ncp.player_natural"), "Only what the player types; no "
         "description or commentary; 50 words.", "no description of the scene, no commentary"),
    Rule("player.no_meta", ("ncp.player_adversarial", "ncp.player_natural"), "No meta-talk or jailbreak requests.",
         "JSON"),
    Rule("adversarial.pressure", ("ncp.player_adversarial",), "Pressure-test with bold in-world moves.",
         "Good pressure points"),
    Rule("adversarial.switch_tactics", ("ncp.player_adversarial",), "Switch tactics when resistance loops.",
         "switch tactics when one line of resistance starts to loop"),
    Rule("natural.cooperative", ("ncp.player_natural",), "Sincere, immersed play; not a tester or speedrunner.",
         "do not play a tester, optimiser, speedrunner"),
)
