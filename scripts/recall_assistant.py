#!/usr/bin/env python3
"""Generates the ASSISTANT recall split `datasets/recall-assistant/` (standard library only).

The other two splits are group chats of short turns (every turn under 280 characters). Real
assistant conversations are not: a user writes a paragraph, the assistant answers with a page.
This split is one user and one assistant over many sessions, the assistant's replies 150-450
words (intros, numbered advice, an outro), the user's 20-90 words; facts about the user are
planted in the middle of ordinary requests, and some answers are in the assistant's own long
replies (what it recommended). It is a TUNING split for what the short-turn splits cannot show:
how the working context spends its room when turns are long (which turn is cut, which neighbour
is worth its tokens).

Usage:
    python3 scripts/recall_assistant.py            # (re)writes datasets/recall-assistant/
    python3 scripts/recall_assistant.py OUT_DIR    # writes elsewhere
    python3 scripts/recall_assistant.py --check    # regenerates into a temp dir, compares byte for byte

Every value is checked to appear (as whole words) only in its answer turns before anything is
written; on a failure the script prints the problems and exits non-zero without writing.
"""

import datetime as dt
import filecmp
import json
import os
import random
import re
import shutil
import sys
import tempfile

SEED = 0xA5_5157
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(ROOT, "datasets", "recall-assistant")
CONVERSATIONS = 12

# ---------------------------------------------------------------------------------------------
# Topics: what sessions are about. Each has request templates (the user's ask), advice items
# (the assistant's numbered points, {X} is the request's subject) and subjects.
# ---------------------------------------------------------------------------------------------

TOPICS = {
    "cooking": dict(
        subjects=["a weeknight dinner", "meal prep for the week", "a vegetarian lasagna",
                  "a birthday cake", "homemade bread", "a quick lunch", "a curry", "soup"],
        asks=["Can you help me plan {X}?", "I want to make {X}. Any tips?",
              "What should I keep in mind when cooking {X}?",
              "I'm trying {X} this weekend and I'm a bit nervous about it."],
        items=["Prep your ingredients before you turn on the stove, it keeps the cooking calm",
               "Season in layers and taste as you go instead of salting only at the end",
               "A heavy pan holds heat evenly, which matters more than the brand",
               "Let the dish rest for a few minutes so the flavours settle",
               "Keep a small bowl of stock nearby to loosen anything that thickens too fast",
               "Roast the vegetables at a high temperature so they brown rather than steam",
               "Write down what you changed, so the next attempt starts from what worked",
               "Double the recipe and freeze half; future you will be grateful",
               "Fresh herbs go in at the end, dried ones early in the cooking",
               "A squeeze of acid such as lemon or vinegar brightens a heavy sauce"]),
    "travel": dict(
        subjects=["a week in Portugal", "a weekend city break", "a long train journey",
                  "a family holiday", "a hiking trip", "a beach vacation", "a trip to Japan"],
        asks=["I'm planning {X}. What should I think about?", "Any advice for {X}?",
              "Could you help me put together an itinerary for {X}?"],
        items=["Book the long-distance legs first; local transport is easy to sort on arrival",
               "Keep one unplanned day, because the best afternoons are rarely scheduled",
               "Carry a paper copy of your bookings in case your phone runs out of battery",
               "Check whether museums close on Mondays before you fix the itinerary",
               "Pack layers, since mornings and evenings can be much cooler than midday",
               "Learn a handful of polite phrases in the local language; people notice",
               "Travel insurance is worth it for anything with non-refundable bookings",
               "Stay near a transit hub so that day trips do not eat your mornings",
               "Eat where the locals queue, not where the menu has photographs",
               "Leave some room in your bag for the things you will buy on the way"]),
    "fitness": dict(
        subjects=["a running plan", "strength training", "getting back into exercise",
                  "a 10k race", "stretching", "a home workout", "swimming"],
        asks=["Can you suggest {X} for a beginner?", "I want to start {X}. Where do I begin?",
              "What's a sensible approach to {X}?"],
        items=["Increase the load by no more than about ten percent a week",
               "Sleep is part of training; recovery is where the progress happens",
               "Warm up for five to ten minutes before anything intense",
               "Track your sessions, since consistency matters more than any single workout",
               "Mix hard days with easy days instead of pushing every session",
               "Good form beats heavy weight every time, especially at the start",
               "Hydrate through the day rather than only during exercise",
               "Schedule your sessions like appointments so they actually happen",
               "A rest day after two or three training days keeps injuries away",
               "Celebrate small milestones; motivation grows from visible progress"]),
    "money": dict(
        subjects=["a monthly budget", "saving for a deposit", "paying off a credit card",
                  "an emergency fund", "retirement savings", "cutting subscriptions"],
        asks=["Can you help me with {X}?", "I'd like some advice on {X}.",
              "What is a good way to approach {X}?"],
        items=["List every fixed cost first, then decide what is left for everything else",
               "Automate the transfer to savings on payday so it happens before spending",
               "Pay the highest-interest debt first while keeping minimum payments on the rest",
               "Keep three to six months of expenses in an easy-access account",
               "Review your subscriptions every quarter and cancel what you forgot about",
               "Separate accounts for bills and spending make overspending visible",
               "Round numbers are easier to stick to than precise targets",
               "Small recurring costs add up faster than occasional big purchases",
               "Decide in advance how you will treat windfalls such as bonuses",
               "A budget that allows some fun is one you will actually keep"]),
    "garden": dict(
        subjects=["a vegetable patch", "balcony plants", "tomatoes", "a herb garden",
                  "houseplants", "a compost heap", "spring bulbs"],
        asks=["I'm starting {X}. What do I need to know?", "Any tips for {X}?",
              "How do I look after {X}?"],
        items=["Most plants prefer deep watering twice a week to a sprinkle every day",
               "Check the light: six hours of direct sun is what most vegetables want",
               "Mulch keeps the soil moist and the weeds down",
               "Start with a few easy plants and expand once you know your space",
               "Feed container plants more often, since nutrients wash out quickly",
               "Pinch out the tips of herbs so they grow bushy rather than tall",
               "Rotate crops each year so pests do not settle in",
               "Water in the morning so leaves dry before evening",
               "Keep a notebook of what you planted and when",
               "Good drainage matters more than an expensive potting mix"]),
    "work": dict(
        subjects=["a difficult conversation with my manager", "a job interview",
                  "a presentation", "time management", "a performance review",
                  "asking for a raise", "running a meeting"],
        asks=["How should I prepare for {X}?", "Can you give me some advice on {X}?",
              "I'm stressed about {X}. Any thoughts?"],
        items=["Write down the three points you most want to get across",
               "Practise out loud; ideas sound different when spoken",
               "Ask questions early so that expectations are clear on both sides",
               "Block focused time in your calendar and defend it",
               "Bring concrete examples rather than general impressions",
               "Agree on next steps before the conversation ends",
               "Prepare for the hardest question you could be asked",
               "Send a short written summary afterwards so everyone remembers the same thing",
               "Take a breath before you answer; a pause reads as confidence",
               "Keep the meeting to its agenda and move side topics to another time"]),
}

INTROS = ["Great question! Here are some ideas for {X}.", "Happy to help with {X}.",
          "Sure, let's work through {X} together.", "Here's how I would approach {X}.",
          "That sounds like a good plan. A few suggestions for {X}:"]
OUTROS = ["Let me know how it goes, and feel free to ask follow-up questions.",
          "If you tell me more about your situation I can tailor this further.",
          "I hope this helps; good luck with it!",
          "Would you like me to turn this into a checklist?",
          "Happy to go deeper on any of these points."]
THANKS = ["Thanks, that's really helpful.", "Great, I'll try that.",
          "That makes sense. I'll give it a go this week.",
          "Perfect, thank you. One more thing though.", "Okay, noted. Thanks a lot!"]
CHATTER = ["I've had a busy week so this is a nice distraction.",
           "I keep putting this off, so I'd like a plan I can actually follow.",
           "My schedule is all over the place at the moment.",
           "I don't have a lot of time in the evenings.",
           "I tried something similar last year and it did not go well.",
           "I'd rather keep it simple if possible."]

# ---------------------------------------------------------------------------------------------
# Facts about the user, planted in a request. {V} the value. `q` shares the subject words with
# `say`; `when` asks for the date (the answer is the turn's created_at).
# ---------------------------------------------------------------------------------------------

USER_FACTS = [
    dict(key="dog", values=["Pepper", "Biscuit", "Waffles", "Juniper", "Marmalade", "Pickle"],
         say="By the way, I just adopted a dog, a little beagle called {V}, so my evenings are busier.",
         q="What is the name of the dog I adopted?", when="When did I adopt my dog?"),
    dict(key="job", values=["radiographer", "cartographer", "sommelier", "actuary", "glassblower",
                            "locksmith"],
         say="I started a new job last month as a {V}, which is why my routine has changed.",
         q="What new job did I start?", when="When did I mention starting my new job?"),
    dict(key="city", values=["Ljubljana", "Tallinn", "Valparaiso", "Hobart", "Trondheim", "Galway"],
         say="We finally moved to {V} a few weeks ago and I'm still unpacking boxes.",
         q="Which city did I move to?", when="When did I tell you about moving?"),
    dict(key="instrument", values=["cello", "banjo", "ukulele", "trombone", "harmonica", "bassoon"],
         say="I also signed up for {V} lessons on Thursdays, so I need my evenings free.",
         q="Which instrument am I taking lessons in?", when="When did I sign up for the lessons?"),
    dict(key="sister", values=["Rosalind", "Henrike", "Mirela", "Anouk", "Solveig", "Thandiwe"],
         say="My sister {V} is visiting next month and she's a picky eater.",
         q="What is my sister's name?", when="When did I mention my sister's visit?"),
    dict(key="car", values=["Fiat Panda", "Volvo estate", "Mazda roadster", "Kia Niro",
                            "Skoda Yeti", "Citroen Berlingo"],
         say="I bought a car too, a second-hand {V}, so road trips are finally an option.",
         q="What car did I buy?", when="When did I buy the car?"),
    dict(key="allergy", values=["sesame", "shellfish", "hazelnuts", "mustard", "celery", "lupin"],
         say="One thing to keep in mind: I found out I'm allergic to {V}.",
         q="What food am I allergic to?", when="When did I find out about my allergy?"),
    dict(key="race", values=["Berlin half marathon", "Bristol 10k", "Lisbon marathon",
                             "Oslo trail run", "Dublin 5 mile", "Seville half marathon"],
         say="I registered for the {V} in the autumn, which is a big goal for me.",
         q="Which race did I register for?", when="When did I register for the race?"),
]

# What the assistant recommends in a long reply; the question asks what it recommended.
ASSISTANT_FACTS = [
    dict(key="book", topic="money", values=["The Thrifty Compass", "Pennies and Plans",
                                            "Quiet Compounding", "The Ledger Habit",
                                            "Small Sums Grow", "Budget Without Tears"],
         item="For reading, I recommend the book {V}, which explains budgeting in plain language",
         q="Which book did you recommend about budgeting?"),
    dict(key="stretch", topic="fitness", values=["the pigeon pose", "the cobra stretch",
                                                  "the butterfly stretch", "the lizard lunge",
                                                  "the thread the needle", "the cat cow flow"],
         item="After running, hold {V} for thirty seconds on each side to loosen the hips",
         q="Which stretch did you suggest after running?"),
    dict(key="variety", topic="garden", values=["Sungold", "Black Krim", "Brandywine",
                                                "Green Zebra", "Gardeners Delight", "Moneymaker"],
         item="For a first crop of tomatoes, the {V} variety is forgiving and very productive",
         q="Which tomato variety did you recommend?"),
    dict(key="spice", topic="cooking", values=["smoked paprika", "sumac", "fenugreek",
                                               "star anise", "asafoetida", "za'atar"],
         item="To deepen the flavour of the curry, add a pinch of {V} with the onions",
         q="Which spice did you suggest adding to the curry?"),
]

FILLER_MIN_WORDS = 150


def words(s):
    return re.findall(r"[a-z0-9']+", s.lower())


def assistant_reply(rng, topic, subject, planted=None):
    t = TOPICS[topic]
    items = rng.sample(t["items"], rng.randint(5, 9))
    if planted is not None:
        items.insert(rng.randint(1, len(items) - 1), planted)
    parts = [rng.choice(INTROS).replace("{X}", subject)]
    for n, item in enumerate(items, 1):
        extra = rng.choice(["", " This is easy to overlook.", " It saves time later.",
                            " Many people find this makes the biggest difference.",
                            " Start small and build from there.",
                            " You can adjust it to your own situation."])
        parts.append(f"{n}. {item}.{extra}")
    parts.append(rng.choice(OUTROS))
    return "\n".join(parts)


def user_ask(rng, topic, subject, planted=None):
    t = TOPICS[topic]
    parts = [rng.choice(t["asks"]).replace("{X}", subject)]
    parts += rng.sample(CHATTER, rng.randint(1, 2))
    if planted is not None:
        parts.insert(rng.randint(1, len(parts)), planted)
    return " ".join(parts)


def conversation(rng, index):
    """One conversation's turns and questions."""
    turns, questions = [], []
    start = dt.datetime(2023, 1, 9, 18, 0) + dt.timedelta(days=17 * index)
    facts = rng.sample(USER_FACTS, 6)
    afacts = rng.sample(ASSISTANT_FACTS, 3)
    sessions = 26
    # Which session plants what: user facts (one of them updated later), assistant facts.
    plan = {}
    slots = rng.sample(range(1, sessions - 1), len(facts) + len(afacts) + 1)
    for f, s in zip(facts, slots):
        plan[s] = ("user", f)
    for f, s in zip(afacts, slots[len(facts):]):
        plan[s] = ("assistant", f)
    updated = facts[0]
    first_slot = slots[0]
    later = [s for s in range(first_slot + 2, sessions) if s not in plan]
    update_slot = rng.choice(later) if later else sessions - 1
    plan[update_slot] = ("update", updated)
    values = {}
    planted = {}
    when = start
    for s in range(sessions):
        when += dt.timedelta(days=rng.randint(2, 9), minutes=rng.randint(0, 300))
        topic = rng.choice(sorted(TOPICS))
        what = plan.get(s)
        if what and what[0] == "assistant":
            topic = what[1]["topic"]
        t = when
        exchanges = rng.randint(3, 6)
        plant_at = rng.randint(0, exchanges - 1)
        for e in range(exchanges):
            subject = rng.choice(TOPICS[topic]["subjects"])
            u_planted = a_planted = None
            if what and e == plant_at:
                kind, f = what
                if kind == "user":
                    v = f["values"][index % len(f["values"])]
                    values[f["key"]] = v
                    u_planted = f["say"].replace("{V}", v)
                elif kind == "update":
                    old = values[f["key"]]
                    pool = [x for x in f["values"] if x != old]
                    v = pool[index % len(pool)]
                    values[f["key"] + "#new"] = v
                    u_planted = ("Quick update on something I told you before: "
                                 + f["say"].replace("{V}", v).replace("I just", "I've now").replace(
                                     "last month", "this week"))
                else:
                    v = f["values"][index % len(f["values"])]
                    a_planted = f["item"].replace("{V}", v)
            if e == 0 or u_planted is not None or rng.random() < 0.5:
                user = user_ask(rng, topic, subject, u_planted)
            else:
                user = rng.choice(THANKS) + " " + user_ask(rng, topic, subject)
            turns.append(dict(role="user", content=user, created_at=t))
            ui = len(turns) - 1
            t += dt.timedelta(minutes=rng.randint(1, 4))
            turns.append(dict(role="assistant", content=assistant_reply(rng, topic, subject, a_planted),
                              created_at=t))
            ai = len(turns) - 1
            t += dt.timedelta(minutes=rng.randint(2, 9))
            if what and e == plant_at:
                kind, f = what
                planted[v] = ai if kind == "assistant" else ui
                if kind == "user":
                    questions.append(dict(q=f["q"], turns=[ui], cat="user_fact", answer=v))
                    questions.append(dict(q=f["when"], turns=[ui], cat="temporal",
                                          answer=turns[ui]["created_at"].strftime("%-d %B %Y")))
                    if f is updated:
                        first_turn = ui
                elif kind == "update":
                    questions.append(dict(q="As of my latest update, " + f["q"][0].lower() + f["q"][1:],
                                          turns=[ui], cat="update", answer=v))
                    questions.append(dict(q=f["q"] + " And what was it before the update?",
                                          turns=[first_turn, ui], cat="multi_session",
                                          answer=f"{values[f['key']]}, then {v}"))
                else:
                    questions.append(dict(q=f["q"], turns=[ai], cat="assistant_fact", answer=v))
    return turns, questions, planted


def check(turns, questions, planted):
    problems = []
    for v, at in planted.items():
        pat = re.compile(r"\b" + re.escape(v.lower()) + r"\b")
        holders = [i for i, t in enumerate(turns) if pat.search(t["content"].lower())]
        if holders != [at]:
            problems.append(f"value {v!r} is in turns {holders}, planted in {at}")
    for q in questions:
        for i in q["turns"]:
            if not 0 <= i < len(turns):
                problems.append(f"{q['q']!r}: turn {i} out of range")
    return problems


def generate(out):
    rng = random.Random(SEED)
    problems, convs, qs = [], {}, []
    for c in range(CONVERSATIONS):
        name = f"assist{c + 1:02}"
        turns, questions, values = conversation(rng, c)
        problems += [f"{name}: {p}" for p in check(turns, questions, values)]
        convs[name] = turns
        for q in questions:
            qs.append(dict(conversation=name, question=q["q"], answer_turns=q["turns"],
                           category=q["cat"], answer=q["answer"]))
    if problems:
        print("\n".join(problems), file=sys.stderr)
        sys.exit(1)
    os.makedirs(os.path.join(out, "conversations"), exist_ok=True)
    for name, turns in convs.items():
        with open(os.path.join(out, "conversations", name + ".jsonl"), "w") as f:
            for t in turns:
                row = dict(role=t["role"], content=t["content"],
                           created_at=t["created_at"].strftime("%Y-%m-%dT%H:%M:00Z"))
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
    with open(os.path.join(out, "questions.jsonl"), "w") as f:
        for q in qs:
            f.write(json.dumps(q, ensure_ascii=False) + "\n")
    return convs, qs


def main():
    args = sys.argv[1:]
    if args == ["--check"]:
        tmp = tempfile.mkdtemp()
        try:
            generate(tmp)
            a = sorted(os.listdir(os.path.join(tmp, "conversations")))
            files = ["questions.jsonl"] + [os.path.join("conversations", n) for n in a]
            bad = [n for n in files
                   if not filecmp.cmp(os.path.join(tmp, n), os.path.join(DEFAULT_OUT, n),
                                      shallow=False)]
            if bad:
                print("differs from its generator: " + ", ".join(bad), file=sys.stderr)
                sys.exit(1)
            print(f"{DEFAULT_OUT}: matches its generator ({len(files)} files)")
        finally:
            shutil.rmtree(tmp)
        return
    out = args[0] if args else DEFAULT_OUT
    convs, qs = generate(out)
    n_turns = sum(len(t) for t in convs.values())
    cats = {}
    for q in qs:
        cats[q["category"]] = cats.get(q["category"], 0) + 1
    print(f"{out}: {len(convs)} conversations, {n_turns} turns, {len(qs)} questions "
          + ", ".join(f"{k} {v}" for k, v in sorted(cats.items())))


if __name__ == "__main__":
    main()
