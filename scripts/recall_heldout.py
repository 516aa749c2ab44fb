#!/usr/bin/env python3
"""Generates the HELD-OUT recall dataset `datasets/recall-heldout/` (standard library only).

This split is frozen: never tune retrieval on it and do not read its content while tuning.
It is built by a method unlike `examples/recall_dataset/` (the tuning split): each conversation
simulates two or three friends whose lives unfold as story arcs over months; facts are planted as
small scenes (a remark, an ask and its reply, a back-reference in a later session) among
free-form small talk assembled from sentence fragments, with its own names, fact kinds and values.

Usage:
    python3 scripts/recall_heldout.py            # (re)writes datasets/recall-heldout/
    python3 scripts/recall_heldout.py OUT_DIR    # writes elsewhere
    python3 scripts/recall_heldout.py --check    # regenerates into a temp dir, compares byte for byte

Every property of every category is verified before anything is written; on any failure the
script prints the problems and exits non-zero without writing.
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

SEED = 0x5EED_2B17
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(ROOT, "datasets", "recall-heldout")

# ---------------------------------------------------------------------------------------------
# Names (none shared with the tuning split)
# ---------------------------------------------------------------------------------------------

NAMES = [
    "Wilhelmina", "Barnaby", "Cosima", "Thaddeus", "Ottilie", "Percival", "Marisol", "Eudora",
    "Lachlan", "Philippa", "Caspian", "Imogen", "Ignatius", "Winifred", "Ambrose", "Hortense",
    "Leopold", "Beatrix", "Cornelius", "Delphine", "Evander", "Gideon", "Henrietta", "Jolyon",
    "Keziah", "Lysander", "Marguerite", "Octavia", "Peregrine", "Rufus", "Seraphina", "Tobias",
    "Ulrika", "Wendell", "Xanthe", "Zebedee", "Araminta", "Fenwick",
]
BANNED_NAMES = ["Dmitri", "Lucas", "Bruno", "Zara", "Nora", "Omar", "Priya", "Ingrid", "Mateo",
                "Jonas", "Mara", "Jasper"]

# ---------------------------------------------------------------------------------------------
# Fact kinds. Placeholders: {P} the person, {V} the value.
#   q     question (single_hop, speaker, adjacent)      when  temporal question
#   third someone else states it, naming {P}            first {P} states it in the first person
#   ask   a turn asking {P} (holds q's content words)   reply {P}'s answer (no word of q)
#   pq/pt paraphrase question / first-person turn sharing no content word
# ---------------------------------------------------------------------------------------------

K = []


def kind(key, subj, values, q, when, third, first, ask, reply, pq, pt, mood="good", buy=False,
         what=None, price=False):
    K.append(dict(key=key, subj=subj, values=values, q=q, when=when, third=third, first=first,
                  ask=ask, reply=reply, pq=pq, pt=pt, mood=mood, buy=buy, what=what or subj,
                  price=price))


kind("pet", "pet",
     ["cockatiel", "bearded dragon", "greyhound", "axolotl", "hedgehog", "chinchilla", "tortoise",
      "ferret"],
     "What pet did {P} adopt?", "When did {P} adopt the pet?",
     ["Big news from {P}: there is now a {V} living in that flat, and it already rules the place.",
      "Just so everyone knows, {P} came home with a {V} this afternoon and is completely smitten."],
     ["Okay, confession: I brought home a {V} today and I regret nothing.",
      "So I may have walked into the rescue centre for a look and walked out with a {V}. Oops."],
     ["{P}, which pet did you adopt in the end?",
      "Wait {P}, did you actually adopt a pet? Which one?"],
     ["A {V}! Came home with me in a cardboard box and has already chewed through a cable.",
      "A {V}, and it's already snoring on the good cushion."],
     "Which animal did {P} take in?",
     "Meet the newest member of my household: a {V}. Currently asleep in a shoebox.")

kind("specialist", "specialist appointment",
     ["dermatologist", "audiologist", "orthodontist", "podiatrist", "rheumatologist",
      "neurologist", "endocrinologist"],
     "Which specialist did {P} see?", "When did {P} see the specialist?",
     ["{P} finally got in with the {V} this morning, after months on the waiting list.",
      "Heard {P} was at the {V} today, hopefully with some answers this time."],
     ["Just out of my appointment with the {V}. Mostly good news, I'll explain properly later.",
      "I sat with the {V} for twenty minutes this morning and finally have a plan."],
     ["{P}, which specialist did you end up having to see?",
      "{P}, remind me which specialist you had to see?"],
     ["The {V}. Waited forty minutes in a beige room reading ancient magazines first.",
      "The {V}, and she was lovely, which helped."],
     "Which doctor did {P} visit?",
     "I sat in a waiting room for an hour to get ten minutes with the {V}. Worth it though.",
     mood="bad")

kind("wedding", "wedding",
     ["vineyard", "converted barn", "tram depot", "botanical greenhouse", "castle ruin",
      "riverside mill", "ski chalet"],
     "Where was the wedding {P} attended?", "When did {P} go to the wedding?",
     ["{P} is at a wedding today in a {V}, sending us photos of the cake every ten minutes.",
      "{P} has been at that wedding in a {V} all day and the photos are unreal."],
     ["At my friend's wedding right now, it's in a {V} and I'm already crying.",
      "Writing this from the wedding. It's in a {V}! Speeches next, pray for me."],
     ["{P}, where was that wedding you attended?",
      "{P}, the wedding you attended, where was it again?"],
     ["In a {V}! Gorgeous setting, terrible acoustics for the speeches.",
      "A {V}, of all places. Great dancing though."],
     "Which venue hosted the marriage ceremony {P} went to?",
     "My oldest friend just said I do in a {V}, and I'm crying into my prosecco.")

kind("course", "course",
     ["upholstery", "bricklaying", "bike mechanics", "stained glass", "cheesemaking",
      "blacksmithing", "stone carving"],
     "What course did {P} sign up for?", "When did {P} sign up for the course?",
     ["{P} just enrolled in a {V} course, so expect lots of show and tell from now on.",
      "Guess who paid for a {V} course today? {P}. We are all getting homemade presents."],
     ["Right, I've done it: paid the deposit for a {V} course this morning.",
      "I just booked myself onto a {V} course and I'm weirdly nervous."],
     ["{P}, what course did you sign up for in the end?",
      "{P}, what was the course you were going to sign up for?"],
     ["{V}, evenings. Expect me to be insufferable about it.",
      "{V}! Twelve weeks, I bought an apron already."],
     "Which skill is {P} learning?",
     "I paid the deposit for twelve weeks of {V} lessons, starting this week.")

kind("recipe", "recipe",
     ["lamb tagine", "rhubarb crumble", "beetroot risotto", "cardamom buns", "shakshuka",
      "miso aubergine", "gnocchi", "onion bhajis"],
     "What dish did {P} learn to cook?", "When did {P} first make the new dish?",
     ["{P} just sent me a photo of homemade {V}, and it looks better than a restaurant's.",
      "Apparently {P} made {V} from scratch today. I'm inviting myself round."],
     ["I finally made {V} from scratch today and it actually worked.",
      "I made {V} this evening and nobody got food poisoning. Chef's kiss."],
     ["{P}, what was the dish you were learning to cook?",
      "{P}, which dish are you learning to cook at the moment?"],
     ["{V}. Third attempt was edible, the first two went in the bin.",
      "{V}! My flatmates are my test subjects."],
     "Which meal has {P} mastered in the kitchen?",
     "Made {V} from scratch tonight and my flatmates licked the plates clean.")

kind("landlord", "landlord",
     ["leaking boiler", "black mould", "broken intercom", "rent hike", "mice", "dodgy wiring",
      "blocked drains"],
     "What problem did {P} have with the landlord?", "When did {P} complain to the landlord?",
     ["{P} is fighting the landlord over the {V} again, poor thing.",
      "{P} had to chase the landlord about the {V} today, and got nowhere."],
     ["Sent my landlord a very polite, very angry email about the {V} today.",
      "I rang the landlord about the {V} this morning. Voicemail, obviously."],
     ["{P}, what was the problem with your landlord?",
      "{P}, what problem are you having with the landlord now?"],
     ["The {V}. Three emails and still nothing, I'm losing patience.",
      "The {V}, and he keeps saying he'll send someone."],
     "What housing issue is bothering {P}?",
     "Still no reply about the {V}, and the guy who owns my flat never answers his phone.",
     mood="bad")

kind("houseplant", "houseplant",
     ["monstera", "bonsai juniper", "olive tree", "venus flytrap", "staghorn fern", "kumquat",
      "string of pearls"],
     "What houseplant did {P} buy?", "When did {P} buy the houseplant?",
     ["{P} just came home with a {V}, the windowsill is officially full.",
      "{P} bought a {V} today and has already named it."],
     ["Couldn't resist, I carried a {V} home on the bus today.",
      "I bought a {V} this afternoon. Please tell me how not to kill it."],
     ["{P}, which houseplant did you buy at the market?",
      "{P}, what houseplant did you buy in the end?"],
     ["A {V}, and it has its own shelf now.",
      "A {V}! It's bigger than the cat."],
     "Which greenery did {P} pick up?",
     "I carried a {V} home on the bus and got some very funny looks.",
     buy=True, what="a houseplant")

kind("interview", "job interview",
     ["city museum", "hospital pharmacy", "textbook publisher", "water board",
      "robotics startup", "brewery", "seed bank"],
     "Where did {P} have a job interview?", "When was {P}'s job interview?",
     ["{P} has the big interview at the {V} this afternoon, fingers crossed everyone.",
      "{P} just finished the interview at the {V} and thinks it went well."],
     ["Just walked out of my interview at the {V}, I think it went well?",
      "I just had my interview at the {V} and my hands are still shaking."],
     ["{P}, where was that job interview you had?",
      "{P}, where did you have the job interview?"],
     ["At the {V}. Three people on the panel, one of them yawned twice.",
      "The {V}! Fingers crossed for a call back."],
     "Which employer was {P} hoping to work for?",
     "I survived an hour-long grilling at the {V}, now the waiting game begins.")

kind("kidschool", "school place",
     ["Oakmere Primary", "Larkfield Academy", "Saint Bride's", "Harrowgate Infants",
      "Bellwood Juniors", "Fernleigh Montessori"],
     "Which school did {P}'s daughter get into?", "When did {P} hear about the school place?",
     ["{P}'s daughter just got a place at {V}, proud parent alert.",
      "Great news from {P}: the little one got into {V}!"],
     ["The letter came today: my daughter got a place at {V}!",
      "We just heard our girl got into {V}. I might cry."],
     ["{P}, which school did your daughter get into?",
      "{P}, did your daughter get into the school you wanted? Which one?"],
     ["{V}! First choice, she's over the moon.",
      "{V}, she starts in the autumn."],
     "Where will {P}'s kid be studying?",
     "The letter came: my girl starts at {V} in the autumn!")

kind("fiveaside", "five-a-side match",
     ["penalty shootout", "last-minute equaliser", "hat trick", "own goal", "red card",
      "comeback"],
     "What happened in {P}'s five-a-side match?", "When did {P} play the big five-a-side match?",
     ["{P}'s five-a-side team won tonight with a {V}, apparently.",
      "{P} says the five-a-side game tonight came down to a {V}."],
     ["Just got home from five-a-side: we won thanks to a {V}!",
      "I'm still buzzing, our five-a-side team won after a {V} tonight."],
     ["{P}, what happened in your five-a-side match?",
      "{P}, what happened at the five-a-side match?"],
     ["It was all about the {V}, I'm still buzzing.",
      "A {V}. I'll be telling that story for years."],
     "How did {P}'s football game go?",
     "We sneaked it tonight after a {V}, absolute scenes in the car park.")

kind("trip", "trip",
     ["Dolomites", "Faroe Islands", "Camargue", "Lofoten", "Transylvania", "Atacama",
      "Pyrenees", "Outer Hebrides"],
     "Where did {P} go on the trip?", "When did {P} leave for the trip?",
     ["{P} flies out to the {V} today, jealous doesn't cover it.",
      "{P} is off to the {V} this morning, bags packed for a week already, apparently."],
     ["Boarding now, my next stop is the {V}! See you all in ten days.",
      "At the airport, I'm off to the {V} for ten days and I can't believe it."],
     ["{P}, where did you go on that trip in the end?",
      "{P}, where did the trip go in the end?"],
     ["The {V}! Mostly rain, but the views made up for it.",
      "The {V}. I'm already planning the next one."],
     "Which region is {P} travelling to?",
     "Gate's open, my next stop is the {V}. Back in ten days!")

kind("sofa", "sofa", [], "How much did {P} pay for the sofa?", "When did {P} buy the sofa?",
     ["{P} just bought a sofa for {V} quid, we are all invited round to test it.",
      "{P} bagged a sofa for {V} quid today, an absolute steal."],
     ["Sofa acquired! I paid {V} quid to a man with a van, delivered today.",
      "I bought a sofa today, {V} quid, and it's enormous."],
     ["{P}, how much did you pay for the sofa?",
      "{P}, what did you pay for the sofa in the end?"],
     ["{V} quid, secondhand, and it smells only slightly of dog.",
      "{V} quid. I haggled, I'm proud of myself."],
     "What did {P}'s couch cost?",
     "I handed over {V} quid for a squishy green sofa this morning.",
     buy=True, price=True, what="a sofa")

kind("laptop", "laptop", [], "How much did {P} pay for the laptop?", "When did {P} buy the laptop?",
     ["{P} just bought a laptop for {V} quid, no more borrowing mine.",
      "{P} finally caved and bought a laptop today, {V} quid."],
     ["I bought a laptop today, {V} quid, the old one is officially retired.",
      "I just paid {V} quid for a laptop and it boots in seconds."],
     ["{P}, how much did you pay for the laptop?",
      "{P}, what did you end up paying for the laptop?"],
     ["{V} quid. Refurbished, but you'd never know.",
      "{V}, with a student discount I'm not technically entitled to."],
     "What did {P}'s computer cost?",
     "I handed over {V} quid for a shiny new laptop this morning.",
     buy=True, price=True, what="a laptop")

kind("tent", "tent", [], "How much did {P} pay for the tent?", "When did {P} buy the tent?",
     ["{P} bought a tent today for {V} quid, so camping is happening whether we like it or not.",
      "{P} just spent {V} quid on a tent. Festival season is coming."],
     ["I bought a tent, {V} quid, four-person, very orange.",
      "I paid {V} quid for a tent today, camping plans are go."],
     ["{P}, how much did you pay for that tent?",
      "{P}, what did you pay for the tent?"],
     ["{V} quid, and it apparently pitches in five minutes.",
      "{V}. Bright orange, you'll spot it from space."],
     "What did {P}'s camping shelter cost?",
     "I handed over {V} quid for a four-person tent today.",
     buy=True, price=True, what="a tent")

kind("camera", "camera",
     ["Leica", "Pentax", "Hasselblad", "Rolleiflex", "Minolta", "Yashica"],
     "What camera did {P} buy?", "When did {P} buy the camera?",
     ["{P} just bought a {V}, so expect a lot of moody photos.",
      "{P} came back from the auction with a {V} today."],
     ["Just picked up a {V} from the auction, my wallet is crying.",
      "I bought a {V} today! Older than me and twice as heavy."],
     ["{P}, which camera did you buy in the end?",
      "{P}, what camera did you buy?"],
     ["A {V}! Older than me and twice as heavy.",
      "A {V}, secondhand, the shutter sounds like a dream."],
     "What photography gear did {P} get hold of?",
     "Picked up a {V} at an auction this morning, I can't stop taking pictures.",
     buy=True, what="a camera")

kind("hobby", "new hobby",
     ["birdwatching", "sea swimming", "origami", "metal detecting", "crochet", "fly fishing",
      "geocaching"],
     "What new hobby has {P} taken up?", "When did {P} try the new hobby for the first time?",
     ["{P} has gone all in on {V}, tried it today and won't stop talking about it.",
      "{P} tried {V} for the first time today and is hooked."],
     ["Tried {V} for the first time today and I'm completely hooked.",
      "I gave {V} a go this morning and I think I've found my thing."],
     ["{P}, what's this new hobby you've taken up?",
      "{P}, what new hobby have you taken up?"],
     ["{V}! Don't laugh, it's very relaxing.",
      "{V}. I'm terrible at it and I love it."],
     "What pastime is {P} into these days?",
     "Gave {V} a go at the weekend and I'm completely hooked.")

kind("charity", "charity challenge",
     ["sponsored swim", "sponsored silence", "head shave", "coast-to-coast cycle", "fire walk",
      "abseil"],
     "What charity challenge did {P} do?", "When did {P} do the charity challenge?",
     ["{P} did a {V} today for charity, absolute legend.",
      "{P} completed a {V} this afternoon for charity, the donations keep coming."],
     ["Done! Finished my {V} this afternoon and raised a lovely pot for the children's ward.",
      "I did the {V} today! Thanks everyone who donated."],
     ["{P}, what was the charity challenge you did?",
      "{P}, what charity challenge did you do?"],
     ["A {V}! Raised more than I expected, people are generous.",
      "A {V}. Never again, but worth it."],
     "What fundraiser did {P} take part in?",
     "Completed my {V} this afternoon, the donation page has gone wild.")

kind("talk", "conference talk",
     ["sewer maintenance", "bee navigation", "medieval accounting", "tide tables",
      "typography", "soil bacteria"],
     "What was {P}'s conference talk about?", "When did {P} give the conference talk?",
     ["{P} just gave a whole talk on {V} at the conference, apparently it went down a storm.",
      "{P} spoke about {V} at the conference today, and people actually stayed."],
     ["Gave my talk on {V} this morning and nobody fell asleep. Result.",
      "I just finished my talk on {V} and there were questions!"],
     ["{P}, what was your conference talk about again?",
      "{P}, what's the conference talk about?"],
     ["{V}, believe it or not. Forty people showed up!",
      "{V}. Niche, but I'm passionate."],
     "What topic did {P} present on?",
     "Forty minutes on {V} at the podium and I didn't even need my notes.")

kind("quiz", "pub quiz team",
     ["Quizzly Bears", "Les Quizerables", "Universally Challenged", "Spice Squirrels",
      "Tequila Mockingbirds", "Agatha Quizteas"],
     "What is {P}'s pub quiz team called?", "When did {P}'s pub quiz team win?",
     ["{P}'s quiz team, the {V}, won tonight, so drinks are on them.",
      "{P} and the {V} finally won the quiz tonight!"],
     ["We won the quiz tonight! The {V} are champions at last.",
      "I'm buzzing, the {V} won the quiz tonight after a year of trying."],
     ["{P}, what's your pub quiz team called again?",
      "{P}, what is your pub quiz team called?"],
     ["The {V}. I didn't pick it, don't look at me.",
      "The {V}, it was that or something worse."],
     "What name did {P}'s trivia squad choose?",
     "We're officially the {V} now, voted it in over crisps.")

kind("neighbourhood", "neighbourhood",
     ["Harrow Vale", "Wexcombe", "Millbrook", "Saltmarsh", "Kettering Hill", "Dunmore Quay"],
     "Which neighbourhood did {P} move to?", "When did {P} move house?",
     ["{P} moved to {V} today, housewarming pending.",
      "{P} is officially living in {V} as of this afternoon."],
     ["Last box carried up the stairs: I am now a resident of {V}.",
      "I moved into my place in {V} today and everything hurts."],
     ["{P}, which neighbourhood did you move to?",
      "{P}, what neighbourhood did you move to in the end?"],
     ["{V}! Ten minutes from the river and the rent is almost sane.",
      "{V}, right by the canal."],
     "Where does {P} live now?",
     "Our street in {V} has three bakeries and a fox that visits nightly.")

kind("stall", "market stall",
     ["hot sauce", "beeswax candles", "sourdough loaves", "knitted hats", "pickled chillies",
      "soap bars"],
     "What does {P} sell at the market stall?", "When did {P} first run the market stall?",
     ["{P} had the stall at the market today selling {V}, and it was heaving.",
      "{P} ran the market stall for the first time today, all {V}."],
     ["My first day at the market stall is done, the {V} all gone by noon!",
      "I ran my first market stall today and sold every bit of {V}."],
     ["{P}, what are you selling at your market stall?",
      "{P}, what do you sell at the market stall?"],
     ["{V}. Gone by eleven, which was a nice surprise.",
      "{V}, mostly. I'm thinking of branching out."],
     "What products does {P} make for customers?",
     "Twenty batches of {V} ready for the weekend, my kitchen is chaos.")

kind("haircut", "haircut",
     ["mullet", "undercut", "bleached fringe", "curtain bangs", "bob", "pixie crop"],
     "What haircut did {P} get?", "When did {P} get the new haircut?",
     ["{P} came in today with a {V} and honestly it's a look.",
      "{P} got a {V} this morning, I nearly didn't recognise them."],
     ["Walked out of the salon with a {V} and I feel like a new person.",
      "I got a {V} today. Be nice."],
     ["{P}, what haircut did you get in the end?",
      "{P}, which haircut did you get?"],
     ["A {V}. My mum hasn't stopped texting about it.",
      "A {V}! I'm still getting used to it."],
     "How has {P} changed their hairstyle?",
     "I went to the salon with a photo, came out with a {V}. No regrets.")

kind("podcast", "podcast",
     ["Dust and Static", "Two Loud Aunts", "Field Notes Weekly", "Slow Commute",
      "Night Shift Radio", "Hollow Tree Tales"],
     "What podcast did {P} launch?", "When did {P} launch the podcast?",
     ["{P}'s podcast, {V}, went live today, go listen.",
      "{P} launched {V} today, the first episode is great."],
     ["Episode one of my podcast {V} is live! Be kind.",
      "I just launched {V}, my very own podcast. Terrifying."],
     ["{P}, what's the podcast you launched called?",
      "{P}, what's the name of the podcast you launched?"],
     ["{V}! Episode one has eleven listeners and I know nine of them.",
      "{V}. Weekly, if I can keep it up."],
     "What is {P}'s audio show called?",
     "Episode one of {V} is out, eleven listeners and nine are my relatives.")

kind("diy", "DIY project",
     ["window seat", "loft ladder", "bookshelf wall", "pergola", "herringbone floor",
      "potting bench"],
     "What DIY project did {P} finish?", "When did {P} finish the DIY project?",
     ["{P} just finished building a {V}, there are photos from every angle.",
      "{P} finished the {V} today, all by hand."],
     ["The {V} is done! Built it myself, every wonky inch.",
      "I finished my {V} this afternoon, only one splinter."],
     ["{P}, what was that DIY project you were finishing?",
      "{P}, what DIY project did you finish?"],
     ["The {V}! Only one splinter, so a success.",
      "The {V}. Took three weekends, but it's solid."],
     "What did {P} build at home?",
     "Every wonky inch of that {V} is my own work, and it's done at last.")

kind("glasses", "glasses",
     ["tortoiseshell", "wire rims", "cat-eye", "horn-rimmed", "aviators"],
     "What glasses did {P} choose?", "When did {P} pick up the new glasses?",
     ["{P} just got new {V} glasses, very distinguished.",
      "{P} picked up {V} glasses today, and they really suit."],
     ["Picked up my new {V} today and I can see individual leaves on trees!",
      "I've got {V} glasses now, and I can read road signs again."],
     ["{P}, which glasses did you choose?",
      "{P}, what glasses did you choose in the end?"],
     ["{V}. Very bookish, I love them.",
      "{V}! The optician said they were bold."],
     "What eyewear did {P} go for?",
     "Got my new {V} today, I can finally read menus again.")

kind("band", "band",
     ["Gravel Saints", "Moth Parade", "Velvet Tractor", "Dinner Ladies", "Static Lagoon",
      "Wolfhound Choir"],
     "What is the name of {P}'s band?", "When did {P}'s band play their first gig?",
     ["{P}'s band, {V}, played their first gig tonight and they were brilliant.",
      "{P} just played the first ever {V} gig, I'm so proud."],
     ["First ever gig done with {V}! My ears are still ringing.",
      "I just played my first gig with {V} and nobody threw anything."],
     ["{P}, what's the name of your band again?",
      "{P}, what is your band's name?"],
     ["{V}. It was that or something worse.",
      "{V}! We argued about it for weeks."],
     "What is {P}'s music group called?",
     "Guess who's the bassist in {V} now? Me! Rehearsals every week.")

kind("raffle", "raffle",
     ["hamper", "spa voucher", "signed rugby ball", "hot air balloon ride", "case of cider",
      "deckchair"],
     "What did {P} win in the raffle?", "When did {P} win the raffle?",
     ["{P} won the {V} in the raffle tonight, of course.",
      "{P}'s ticket came up in the raffle today: a {V}!"],
     ["My ticket came up! I'm the proud owner of a {V}.",
      "I won the raffle today! A {V}, can you believe it."],
     ["{P}, what did you win in the raffle?",
      "{P}, what did you win in that raffle?"],
     ["A {V}! First time my ticket came up in years.",
      "A {V}. I'm never lucky, so this is big."],
     "Which prize did {P} scoop from the prize draw?",
     "My ticket came up and now I own a {V}.")

kind("baby", "sister's baby",
     ["Wren", "Alfie", "Juniper", "Otto", "Marigold", "Ezra", "Tilly"],
     "What did {P}'s sister name the baby?", "When was {P}'s sister's baby born?",
     ["{P}'s sister had the baby today! Little {V}, everyone's doing fine.",
      "Congratulations to {P}, the sister had the baby today: {V}!"],
     ["My sister just had her baby, little {V}, and I'm officially the fun relative.",
      "I'm holding a brand new {V} right now, my sister did brilliantly."],
     ["{P}, what did your sister name the baby?",
      "{P}, what name did your sister give the baby?"],
     ["{V}! Seven pounds of pure noise.",
      "{V}, and I already adore the little one."],
     "What is {P}'s newborn niece or nephew called?",
     "My sister just had her little one, {V}, and I'm officially the fun relative.")

kind("play", "role in the play",
     ["Lady Bracknell", "Puck", "Malvolio", "Banquo", "Titania", "Bottom"],
     "What role did {P} get in the play?", "When did {P} find out about the role in the play?",
     ["{P} got cast as {V} in the community play, rehearsals start soon.",
      "Cast list is up and {P} is {V}!"],
     ["Cast list is up and I'm playing {V}!",
      "I got the part of {V}! Lines to learn."],
     ["{P}, what role did you get in the play?",
      "{P}, which role did you get in the play?"],
     ["{V}! Lines to learn by the end of the month.",
      "{V}, and I'm thrilled."],
     "Which character was {P} cast as for the amateur production?",
     "I'm {V}! Lines to learn and a costume to sort.")

kind("appliance", "kitchen",
     ["fridge", "dishwasher", "oven door", "tumble dryer", "extractor fan", "microwave"],
     "What broke in {P}'s kitchen?", "When did the appliance break in {P}'s kitchen?",
     ["{P}'s {V} packed in today, so we're ordering takeaway.",
      "{P} lost the {V} today, it just died."],
     ["The {V} just died on me, mid-cycle, with everything inside.",
      "My {V} gave up today. Of course it did."],
     ["{P}, what broke in your kitchen this time?",
      "{P}, what broke in the kitchen?"],
     ["The {V}, of course. Repair man comes later in the week.",
      "The {V}. I'm living on toast."],
     "Which appliance stopped working at {P}'s place?",
     "The {V} just died mid-cycle and I'm standing here in a puddle.",
     mood="bad")

kind("award", "award",
     ["Golden Whisk", "Silver Trowel", "Bronze Quill", "Copper Kettle", "Iron Anvil"],
     "What award did {P} win?", "When did {P} win the award?",
     ["{P} got the {V} tonight, there's a trophy and everything.",
      "{P} was handed the {V} at the dinner tonight!"],
     ["They announced it tonight and I got the {V}! Still shaking.",
      "I just won the {V}. I didn't even prepare a speech."],
     ["{P}, what was that award you won?",
      "{P}, what award did you win?"],
     ["The {V}! There was a tiny trophy and a very long speech.",
      "The {V}. I'm still in shock."],
     "Which honour was {P} given?",
     "Still holding the trophy: the {V}, and I only cried a little.")

kind("nickname", "nickname at work",
     ["Captain Crumbs", "Duchess", "Sparky", "Bean", "Professor Toast", "Moose"],
     "What nickname did {P} get at work?", "When did {P} get the nickname at work?",
     ["{P} has officially been named {V} by the whole office.",
      "The office has started calling {P} {V}, and it's sticking."],
     ["The office has decided: from today I'm {V}. There's no going back.",
      "I have a nickname now, {V}, and I'm not sure how I feel."],
     ["{P}, what nickname did you get at work?",
      "{P}, what's the nickname you get called at work?"],
     ["{V}. It started as a joke and now it's on my mug.",
      "{V}! Don't you dare start."],
     "What do {P}'s colleagues call them?",
     "The office has decided: from today I'm {V}, and there's a mug to prove it.")

# Multi-hop value pools
PLACES = ["Halfmoon Deli", "Copperpot Canteen", "Gristmill Bakehouse", "Tinderbox Grill",
          "Wildrye Bakery", "Ledbury Dumpling House", "Pomegranate Yard", "Bluebottle Diner",
          "Marrowbone Kitchen", "Salt Cellar"]
DISHES = ["smoked mackerel toast", "duck bao", "pistachio eclair", "brown butter crepe",
          "kimchi pancake", "black bean stew", "lemon posset", "crab linguine", "pork katsu",
          "treacle tart", "chicken shawarma", "mushroom ramen", "plum galette",
          "fish pie", "bread pudding", "paella", "spanakopita", "jerk chicken", "saag paneer"]
AREAS = ["Brackenbury", "Norcott Rise", "Ashgrove", "Pellham End", "Cinderford Road",
         "Tollgate Green", "Wyvern Park", "Fallowfield Close"]
SURVEY = ["subsidence", "dry rot", "woodworm", "asbestos", "rising damp", "a sagging roof",
          "knotweed"]
PEAKS = ["Crowhollow Pike", "Blea Knott", "Scarth Fell", "Hobcarton Crag", "Whinlatter Top",
         "Gowbarrow Edge", "Mardale Head", "Sourmilk Gill", "Raven Howe", "Thornthwaite Beacon",
         "Glaramara", "Yewbarrow"]
ITEMS = ["winter coat", "rice cooker", "standing desk", "hiking boots", "wetsuit",
         "guitar amp", "office chair", "pressure washer", "duvet", "bike helmet"]

# ---------------------------------------------------------------------------------------------
# Small talk
# ---------------------------------------------------------------------------------------------

SENTENCES = [
    "The rain has not stopped all week and my umbrella finally turned inside out.",
    "Work is mad at the moment, everyone wants everything done by Friday.",
    "I've been sleeping terribly, I think it's the streetlight outside my window.",
    "We watched that documentary about octopuses and now I feel guilty about calamari.",
    "The bus was twenty minutes late again, I'm starting to take it personally.",
    "Has anyone else noticed how expensive butter has got?",
    "My neighbour has started learning the drums, so that's my evenings sorted.",
    "I spent the whole evening reorganising the spice drawer, which tells you how exciting my life is.",
    "Honestly I just want a week off with nothing planned.",
    "The new coffee machine at work makes everything taste like cardboard.",
    "My mum called for an hour to tell me about her neighbour's hedge.",
    "I finally cleaned the oven and found a fork I'd lost in the spring.",
    "There was a fox in the garden this morning just staring at me.",
    "We've been on a real puzzle kick lately, thousand-piece ones, very calming.",
    "I keep meaning to go for a run and then it gets dark.",
    "My phone screen cracked again, same corner as last time.",
    "Did you see the sunset yesterday? The whole sky went pink.",
    "I'm trying to drink less coffee and it's going badly.",
    "Our team meeting ran two hours over and nobody knows what was decided.",
    "The heating in our building has a mind of its own.",
    "I tried a new route to work and got completely lost.",
    "Somebody at the office microwaved fish again, the whole floor smells.",
    "I've been binge-listening to old radio comedies on the commute.",
    "The supermarket moved everything around and I can't find the lentils anymore.",
    "My brother keeps sending me memes at three in the morning.",
    "I have so much laundry it's basically a piece of furniture now.",
    "The weekend went by in about five minutes.",
    "I bumped into our old teacher in town, she hasn't changed at all.",
    "There's a new cafe on the corner but the queue is always out the door.",
    "I accidentally dyed all my socks grey.",
    "The train was so packed this morning I rode with my face in someone's rucksack.",
    "Honestly the best part of my day was a really good sandwich.",
    "We had a power cut last night and played cards by candlelight, it was lovely actually.",
    "I'm reading a thriller that's so tense I had to put it in the freezer.",
    "My knee has been clicking on the stairs, I'm officially old.",
    "I've been trying to learn to juggle, mostly I just drop things loudly.",
    "The seagulls on our street are getting bolder, one took a whole croissant.",
    "I signed up for one of those step challenges at work and regret it already.",
    "It's so windy here the recycling bins are migrating.",
    "My car made a noise I didn't like, so I turned the radio up.",
    "Anyone got a good series to watch? I've run out.",
    "I did absolutely nothing on Sunday and it was glorious.",
    "I keep getting calls about an accident I've never had.",
    "My grandad has discovered voice notes and sends them constantly.",
    "The cat next door has decided our doorstep is its office.",
    "We're thinking about repainting the hallway but can't agree on anything.",
    "I made way too much soup, if anyone wants some.",
    "I got caught in a hailstorm on the way home, in summer, somehow.",
    "The lift at work has been broken for a week and the stairs are killing me.",
    "My inbox is a disaster, I've declared bankruptcy on it.",
    "I went to the dentist for a cleaning and got a lecture about flossing.",
    "There's a man on our street who walks his cat on a lead.",
    "My mate keeps trying to get me into crossword competitions.",
    "I started a sourdough starter once and it died within a week, never again.",
    "I tried meditating and fell asleep within four minutes.",
    "We had a long argument about whether a hotdog is a sandwich.",
    "The library fines have gone digital so now I get shamed by email.",
    "I watched the football but honestly I was mostly there for the snacks.",
    "My plans for the evening involve a blanket and nothing else.",
    "I've been on the phone with the bank for forty minutes, hold music burned into my brain.",
    "Someone left a whole lasagne tray on the wall outside, very mysterious.",
    "Our street is getting resurfaced so there's a digger outside at seven every morning.",
    "I keep seeing adverts for things I only thought about, it's creepy.",
    "The kids next door have discovered the trampoline, so that's the soundtrack now.",
    "I think I've finally found a decent hairdresser after years of trying.",
    "I walked past the old cinema, they're turning it into flats.",
    "I need a holiday from my holiday.",
    "My houseplants are judging me, I can tell.",
]
THREADS = [
    ["Is it just me or has the whole city decided to dig up every road at once? My commute is a maze of cones and men pointing at holes.",
     "Not just you. Ours has had the same trench open for so long I've started to think of it as a water feature.",
     "Ha, give it a bench and a plaque and it's basically a park."],
    ["Random question, does anyone actually like those self-checkout machines? I get an unexpected item in the bagging area every single time.",
     "I think they can smell fear. I just queue for the one human till now, even if it takes longer.",
     "The woman on that till knows my entire life story at this point.",
     "Honestly that's the most reliable relationship I have."],
    ["I tried to make friends with the crows on my balcony by leaving peanuts out. Now there are eleven of them and they shout at me if I'm late.",
     "You've been adopted by a gang. They'll bring you shiny things soon, that's how it works.",
     "One brought me a bottle cap this morning so I think we're there already."],
    ["Can we talk about how nobody warned me that adult life is ninety percent waiting in for deliveries?",
     "And the parcel always comes in the exact three minutes you're in the shower.",
     "Then you get the card through the door saying they tried. Did they though?"],
    ["I've decided I'm going to be someone who reads before bed instead of scrolling. Day one went really well until I picked up my phone to check the time.",
     "That's how they get you. Put the phone in another room, it's the only thing that works for me.",
     "Then I'd need an actual alarm clock like it's the nineties.",
     "Embrace it. Get one that ticks loudly and haunts you."],
    ["Work update nobody asked for: we've been told to bring our whole selves to the office, but also the office has no chairs because of a mix-up.",
     "Bring your whole self and a camping stool, apparently.",
     "I'm bringing a beanbag and nobody can stop me."],
    ["Just walked past a shop that sells only buttons. Thousands of them. Who keeps that business going?",
     "People with a lot of cardigans and a lot of bad luck, I assume.",
     "I went in, obviously. Came out with three buttons I don't need and a lovely chat with the owner."],
    ["Our upstairs neighbours have started doing some kind of exercise that sounds like moving a piano across the floor, every evening, around ten.",
     "Maybe they ARE moving a piano. Every night. Slowly. To nowhere.",
     "Honestly that would be more relaxing to imagine than whatever it actually is."],
    ["I've been trying to cut down on buying lunch out, so I've been bringing leftovers. Today my leftovers were mostly rice and regret.",
     "Rice and regret is a classic office lunch though, you're in good company.",
     "Someone in our kitchen brings a whole roast dinner in a lunchbox and I think about it constantly."],
    ["Weird thing happened on the train: a stranger fell asleep on my shoulder and I didn't have the heart to move for four stops.",
     "That's so kind. I'd have panicked and done a very slow shrug.",
     "I missed my stop in the end, but it felt like the right thing to do.",
     "You're a better person than me, honestly."],
    ["Does anyone else get irrationally annoyed when people walk slowly in a group across the entire pavement?",
     "All the time. I do a little sigh that I hope communicates my entire worldview.",
     "The sigh never works, but it's important to do it anyway."],
    ["I finally got round to sorting out the cupboard under the stairs. Found four umbrellas, two broken kettles and a trophy I don't remember winning.",
     "What was the trophy for?",
     "It just says participant, which feels like a very honest summary of my life."],
    ["My phone keeps suggesting I look at photos from this day years ago, and it's always me in a terrible fringe.",
     "Those memories features are pure cruelty. Mine keeps showing me a sandwich I apparently photographed in great detail.",
     "Was it a good sandwich though?",
     "It looks like it was the best day of my life, so probably."],
    ["I signed up for a newsletter to get ten percent off a lamp and now I get three emails a day about furniture I'll never afford.",
     "Unsubscribing is a full-time job. I just made a separate email address for all that nonsense.",
     "That's genius, and also slightly unhinged, which I respect."],
    ["Tried the new place that does only toast. Fancy toast, with toppings. It was ridiculous and also really good.",
     "Toast as a concept restaurant is the most this city thing I've ever heard.",
     "It was like eleven different kinds of bread and a man who talked about butter like it was wine."],
    ["Family group chat is on fire again because my aunt shared an article about how houseflies are secretly spies.",
     "Please tell me someone replied seriously.",
     "My uncle asked for the source and she sent a picture of a fly. We've all gone quiet."],
    ["I went to a meeting that could have been an email, and then afterwards we got an email summarising the meeting.",
     "The circle of corporate life. Next they'll schedule a meeting to discuss the email.",
     "Don't, that's literally in my calendar for next week."],
    ["Been thinking about learning to drive properly rather than just owning a licence and being scared of roundabouts.",
     "Roundabouts are just confidence tests with paint. You'd be fine.",
     "Said like someone who has never gone round one four times looking for the exit."],
    ["The bakery near my work has started selling croissants shaped like animals and I have no willpower.",
     "Which animal is the best one?",
     "The squirrel has almond flakes for fur and it's the greatest thing I've eaten this year."],
    ["Had a full conversation with a man at the bus stop about pigeons. He knew a LOT about pigeons.",
     "That's the best kind of stranger chat though, someone really passionate about something niche.",
     "He told me they can recognise faces, so now I'm being extra polite to them."],
    ["Quick poll: are you a make-the-bed-every-morning person or not?",
     "Absolutely not. The duvet goes where it lands.",
     "Every morning without fail, otherwise the day feels wrong.",
     "Wow, a divided nation."],
    ["I cleared out my wardrobe and found a shirt I've been looking for since forever. It was behind another shirt. The whole time.",
     "That's the universe telling you to buy fewer shirts.",
     "Or telling me I need a bigger wardrobe, which is how I'm choosing to interpret it."],
    ["Went for a walk by the river and there was a heron just standing there like it owned the place.",
     "Herons always look like disappointed headteachers.",
     "Exactly that. It looked at me like I'd handed my homework in late."],
    ["Our smoke alarm went off because I made toast. Not burnt toast. Normal toast.",
     "Sensitive alarms are a menace. Ours goes off when someone has a hot shower.",
     "I'm going to have to start eating cereal like an animal."],
    ["I tried one of those apps that tell you to drink water and now my phone nags me more than my mum does.",
     "Does it work though?",
     "I'm very hydrated and mildly resentful, so yes?"],
    ["The queue at the post office today went out the door and round the corner, and there was one person working.",
     "The post office is where time goes to die, honestly.",
     "I was there so long I made friends with the woman behind me. We're basically pen pals now."],
]
SHORT = [
    "Haha", "Ha, fair", "Same here", "Oh no", "True", "Ugh, tell me about it", "Classic",
    "Honestly, same", "Ha! Brilliant", "Oof", "Yeah, fair enough", "Mood", "Oh dear",
    "That tracks", "Wait, really?", "No way", "Love it", "Ha, typical", "Go on then",
    "Okay, that's funny", "Absolutely not", "Ooh, nice", "Right?", "Yep",
]
TAILS = [
    "Anyway, how is everyone?", "Tell you more later.", "What's everyone up to this weekend?",
    "Still can't quite believe it.", "More soon.", "Right, back to work.",
    "Photos to follow.", "Anyway, enough about me.",
]
FACT_TAILS = [
    "Honestly it's been a strange few weeks, but this made up for a lot of it.",
    "I'll tell you the whole story properly when we next meet up, it's a good one.",
    "Not how I expected things to go, but I'm choosing to be happy about it.",
    "Everyone at home has opinions, obviously, and none of them agree.",
    "Still processing, to be honest.",
    "Anyway, that's my news, what's going on with you?",
]
GREETINGS = [
    "Morning all!", "Hey hey, how's everyone's week going?", "Sorry I went quiet, work has been mad.",
    "Evening! Anyone around?", "Hello strangers.", "Right, I'm back. What did I miss?",
    "Hi both! Long time no chat.", "Hey, got a minute?", "Afternoon! Surviving?",
    "Ok I have news, but first, how are you all?",
]
REPLY_GREET = [
    "Hey! All good here, mostly.", "Surviving, just about.", "Hiya! Missed this chat.",
    "Hello! Busy week but fine.", "Oh hi! Perfect timing, I'm procrastinating.",
    "Heyy. Tired but cheerful.",
]
GOODBYES = [
    "Right, I'd better go, speak soon!", "Off to make dinner, bye all!", "Night night!",
    "Gotta run, catch up properly soon.", "Okay bedtime for me. Byee.",
    "Back to the grind. Later!", "Talk soon, take care.", "Must dash, love to all.",
]
UNANSWERED = [
    "{X}, did you ever sort out that thing with your cousin?",
    "{X}, are you still doing the early shifts?",
    "{X}, did your parcel ever turn up?",
    "{X}, what did you end up doing about the noisy upstairs people?",
    "{X}, are we still on for the walk at some point?",
    "{X}, did you finish that series you were watching?",
    "{X}, how's your mum's hip doing?",
    "{X}, did you ever get your deposit back?",
]
GOOD_REACT = [
    "No way! That's brilliant.", "Love that for you.", "Ha, of course you did.",
    "Wait, seriously? Amazing.", "Okay I need the full story next time.",
    "Oh wow. Good for you!", "Brilliant, pictures please.", "I'm weirdly proud of this.",
    "That's so you, honestly.", "Ha! Called it.",
]
BAD_REACT = [
    "Oh no. Keep us posted.", "Ugh, that's rubbish luck.", "Oof, sorry, that sounds stressful.",
    "Oh dear. Shout if you need anything.", "That's the worst, sorry.",
]
OWN_REACT = [
    "Ha, guilty as charged.", "Yep, it's true.", "Can confirm.", "Ha, word travels fast.",
    "Okay, yes, it happened.",
]
LEADIN = [
    "So, any news since last time?", "Go on then, what's new with you?",
    "Right, your turn, what's been happening?", "Anything exciting going on?",
]
MENTION = [
    "{X}, any update on the {S}?", "Remind me to ask {X} about the {S} later.",
    "{X}, is the {S} thing still happening?", "How's the {S} situation, {X}?",
    "I keep meaning to ask about your {S}, {X}.",
    "{X}, didn't you say something about the {S} last time?",
]
VAGUE = [
    "Long story, tell you later.", "Ugh, don't ask.", "Still up in the air, honestly.",
    "Ha, I'll tell you when we see each other.", "It's a whole saga.",
    "Later, I promise. Too much to type.",
]
AFTER = "Ha, so that's the {S} news from {X}! Didn't see that coming."
AFTER_Q = "What was the {S} news from {X}?"

MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]

# ---------------------------------------------------------------------------------------------
# Word checks
# ---------------------------------------------------------------------------------------------

STOP = set("""a an the and or but of to in on at for with from by about as into onto over under
is are was were be been being am do does did done doing have has had having i me my mine myself
you your yours he him his she her hers they them their theirs we us our ours it its this that
these those what which who whom whose when where why how s t d ll re ve m not no nor so just
very up out off if then than there here also too can could will would should shall may might
must one all any some each every oh yes yeah ok okay ha haha well really actually still now
again even ever much more most only own same such don didn doesn isn aren wasn weren haven hasn
couldn wouldn shouldn ain let get""".split()) - {"get"}


def stem(w):
    if len(w) > 5 and w.endswith("ing"):
        w = w[:-3]
    elif len(w) > 4 and w.endswith("ed"):
        w = w[:-2]
    elif len(w) > 4 and w.endswith("es"):
        w = w[:-2]
    elif len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
        w = w[:-1]
    if len(w) > 3 and w.endswith("e"):
        w = w[:-1]
    return w


def tokens(text):
    return re.findall(r"[a-z0-9]+", text.lower())


def content(text):
    return {stem(w) for w in tokens(text) if w not in STOP}


def has_phrase(text, phrase):
    t, p = tokens(text), tokens(phrase)
    return any(t[i:i + len(p)] == p for i in range(len(t) - len(p) + 1))


FIRST_PERSON = {"i", "my", "me", "we", "our", "myself", "us"}
TIME_WORDS = re.compile(
    r"\b(" + "|".join(MONTHS) + r"|[Mm]onday|[Tt]uesday|[Ww]ednesday|[Tt]hursday|[Ff]riday"
    r"|[Ss]aturday|[Ss]unday|[Yy]esterday|[Tt]omorrow|ago|last week|next week|last night"
    r"|(19|20)\d\d)\b")


def fmt_date(d):
    return "%d %s %d" % (d.day, MONTHS[d.month - 1], d.year)


# ---------------------------------------------------------------------------------------------
# Generation
# ---------------------------------------------------------------------------------------------

class Turn:
    __slots__ = ("speaker", "text", "index", "session", "time")

    def __init__(self, speaker, text):
        self.speaker, self.text = speaker, text
        self.index = self.session = self.time = None


class Fact:
    """A planted fact: its value, the turns that hold it, who it is about."""

    def __init__(self, person, value, kind=None):
        self.person, self.value, self.kind = person, value, kind
        self.turns = []


class Gen:
    def __init__(self, rng, name, cast, n_questions):
        self.rng, self.name, self.cast = rng, name, cast
        self.quota = n_questions
        self.used_words = set()
        self.used_values = []
        self.facts = []         # every planted fact (asked or distractor)
        self.questions = []     # (category, question, [turns], answer, extra)
        self.blocks = []        # (session, [Turn]) after placement
        self.reserved = {}      # (person, session) -> True: no other fact of person there
        self.buy_month = {}     # (person, (y, m)) -> count of buy facts
        self.bdays = []         # (person whose birthday it is, session)

    # -- values ----------------------------------------------------------------------------
    def pick_value(self, pool):
        cands = [v for v in pool if v not in self.used_values
                 and not (content(v) & self.used_words)]
        if not cands:
            raise SystemExit("%s: value pool exhausted: %r" % (self.name, pool[:3]))
        v = self.rng.choice(cands)
        self.take(v)
        return v

    def take(self, v):
        self.used_values.append(v)
        self.used_words |= content(v)

    def price(self):
        while True:
            v = str(self.rng.randint(120, 980))
            if v not in self.used_values and v not in self.used_words:
                self.take(v)
                return v

    def value_for(self, k):
        return self.price() if k["price"] else self.pick_value(k["values"])

    def others(self, p):
        return [c for c in self.cast if c != p]

    def fill(self, t, p, v):
        s = t.replace("{P}", p).replace("{V}", v)
        return s[0].upper() + s[1:]


def session_plan(rng, n_sessions, start):
    gaps = [3, 4, 5, 6, 7, 7, 7, 9, 10, 12, 14, 14, 14, 16, 19, 21, 24, 28, 33]
    days, d = [], start
    for i in range(n_sessions):
        days.append(d)
        d = d + dt.timedelta(days=rng.choice(gaps))
    return days


def build_conversation(rng, name, cast, plan):
    g = Gen(rng, name, cast, plan)
    n_sessions = plan["sessions"]
    start = dt.date(2021, 1, 4) + dt.timedelta(days=rng.randint(0, 200))
    days = session_plan(rng, n_sessions, start)
    sessions = [[] for _ in range(n_sessions)]   # list of blocks (lists of Turn)
    load = [0] * n_sessions
    fact_sessions = {}   # person -> list of sessions holding facts about them

    def place(block, person=None, allowed=None, reserve=False, buy=False, extra=()):
        cands = [s for s in range(n_sessions)
                 if (allowed is None or s in allowed)
                 and (person is None or (person, s) not in g.reserved)
                 and all((x, s) not in g.reserved for x in extra)
                 and load[s] + len(block) <= 26]
        if buy and person is not None:
            cands = [s for s in cands
                     if g.buy_month.get((person, (days[s].year, days[s].month)), 0) != -1]
        if reserve and person is not None:
            cands = [s for s in cands if s not in fact_sessions.get(person, [])]
        if not cands:
            raise SystemExit("%s: no session left for a block" % name)
        pick = min(rng.sample(cands, min(3, len(cands))), key=lambda s: load[s])
        sessions[pick].append(block)
        load[pick] += len(block)
        for t in block:
            t.session = pick
        if person is not None:
            fact_sessions.setdefault(person, []).append(pick)
            if reserve:
                g.reserved[(person, pick)] = True
            if buy:
                key = (person, (days[pick].year, days[pick].month))
                if g.buy_month.get(key, 0) != -1:
                    g.buy_month[key] = g.buy_month.get(key, 0) + 1
        return pick

    def react(p, mood, teller):
        pool = GOOD_REACT if mood == "good" else BAD_REACT
        who = rng.choice([c for c in cast if c != teller])
        if who == p:
            return Turn(p, rng.choice(OWN_REACT))
        return Turn(who, rng.choice(pool))

    def fact_block(p, k, form, v):
        """Turns for one fact in one form; returns (block, answer turn)."""
        o = rng.choice(g.others(p))
        if form == "third":
            t = Turn(o, g.fill(rng.choice(k["third"]), p, v))
            return [t, react(p, k["mood"], o)], t
        if form == "first":
            t = Turn(p, g.fill(rng.choice(k["first"]), p, v))
            block = [t, Turn(o, rng.choice(GOOD_REACT if k["mood"] == "good" else BAD_REACT))]
            if rng.random() < 0.4:
                block.insert(0, Turn(o, rng.choice(LEADIN)))
            return block, t
        if form == "ask":
            a = Turn(o, g.fill(rng.choice(k["ask"]), p, v))
            t = Turn(p, g.fill(rng.choice(k["reply"]), p, v))
            return [a, t], t
        if form == "para":
            t = Turn(p, g.fill(k["pt"], p, v))
            return [Turn(o, rng.choice(LEADIN)), t, react(p, k["mood"], p)], t
        if form == "rev":
            t = Turn(p, g.fill(rng.choice(rev_replies(k, p)), p, v))
            after = Turn(o, AFTER.replace("{S}", k["subj"]).replace("{X}", p))
            return [Turn(o, rng.choice(LEADIN)), t, after], t
        raise ValueError(form)

    def rev_replies(k, p):
        q = content(AFTER_Q.replace("{S}", k["subj"]).replace("{X}", p))
        return [r for r in k["reply"] if not (content(r.replace("{V}", "")) & q)]

    def plant(p, k, form, **kw):
        v = g.value_for(k)
        block, t = fact_block(p, k, form, v)
        if form in ("first", "third") and rng.random() < 0.5:
            t.text = t.text + " " + rng.choice(FACT_TAILS)
        f = Fact(p, v, k)
        f.turns = [t]
        g.facts.append(f)
        place(block, person=p, buy=k["buy"], **kw)
        return f, t

    # ---- slots -------------------------------------------------------------------------
    slots = [(p, k) for p in cast for k in K]
    rng.shuffle(slots)
    Q = plan["quota"]

    def take_slot(pred=lambda p, k: True):
        for i, (p, k) in enumerate(slots):
            if pred(p, k):
                return slots.pop(i)
        raise SystemExit("%s: no slot left" % name)

    def ask(cat, text, turns, answer):
        g.questions.append((cat, text, turns, answer))

    # -- birthday questions first (they reserve a session of their event person) ----------
    pairs = [(i, j) for i in range(n_sessions) for j in range(i + 1, n_sessions)
             if (days[j] - days[i]).days in (7, 14)]
    rng.shuffle(pairs)
    used_bday = []
    for _ in range(Q["birthday"]):
        for (i, j) in pairs:
            if i in used_bday or j in used_bday:
                continue
            break
        else:
            raise SystemExit("%s: no session pair for a birthday question" % name)
        used_bday += [i, j]
        b = rng.choice([c for c in cast if c not in [x[0] for x in g.bdays]])
        g.bdays.append((b, j))
        wisher = rng.choice(g.others(b))
        bt = Turn(wisher, "Happy birthday, %s! Hope the day is treating you well." % b)
        place([bt, Turn(b, rng.choice(["Thank you!! Keeping it low-key, cake and a film.",
                                        "Aw thanks! Feeling very spoiled.",
                                        "Thank you! Older, not wiser."]))], allowed=[j])
        p, k = take_slot(lambda p, k: not k["buy"])
        f, t = plant(p, k, rng.choice(["first", "third"]), allowed=[i], reserve=True)
        gap = (days[j] - days[i]).days
        rel = "a week" if gap == 7 else "two weeks"
        ask("temporal", "What happened with %s %s before %s's birthday?" % (p, rel, b),
            [t, bt], "%s: %s" % (k["subj"], f.value))

    # -- month questions: a buy fact alone in its month for that person --------------------
    for _ in range(Q["month"]):
        p, k = take_slot(lambda p, k: k["buy"])
        v = g.value_for(k)
        block, t = fact_block(p, k, rng.choice(["first", "third"]), v)
        f = Fact(p, v, k)
        f.turns = [t]
        g.facts.append(f)
        s = place(block, person=p, buy=True)
        key = (p, (days[s].year, days[s].month))
        g.buy_month[key] = -1   # no other purchase by p in this month
        ask("temporal", "What did %s buy in %s %d?" % (p, MONTHS[days[s].month - 1],
                                                     days[s].year),
            [t], k["what"] + (" for %s quid" % v if k["price"] else " (%s)" % v))

    # -- multi-hop -------------------------------------------------------------------------
    mh_types = ["recommend", "spend", "survey", "peaks", "supper"]
    combos = [(t, c) for t in mh_types for c in cast]
    rng.shuffle(combos)
    mh_plan = combos[:Q["multi_hop"]]
    for typ, p in mh_plan:
        o = rng.choice(g.others(p))
        if typ == "recommend":
            v1, v2 = g.pick_value(PLACES), g.pick_value(DISHES)
            a = Turn(p, "%s, you have to try %s, the little place behind the station. Trust me."
                     % (o, v1))
            b = Turn(o, "%s, finally went to that place you told me about! Had the %s and I've "
                        "been dreaming about it since." % (p, v2))
            parts = [(a, v1, p), (b, v2, o)]
            blocks = [[a, Turn(o, rng.choice(["Ooh, noted.", "Adding it to the list!",
                                               "Okay, I'll go this week."]))],
                      [Turn(o, rng.choice(["Quick one before I forget.", "Okay, important update."])),
                       b, Turn(p, "Told you! Nobody ever listens to me.")]]
            qtext = ("What is the place %s recommended to %s called, and what did %s have there?"
                     % (p, o, o))
            answer = "%s; %s" % (v1, v2)
        elif typ == "spend":
            it1, it2 = g.pick_value(ITEMS), g.pick_value(ITEMS)
            n1, n2 = g.price(), g.price()
            a = Turn(p, "Treated myself to a new %s, %s quid, don't judge." % (it1, n1))
            b = Turn(p, "Confession: another purchase. The %s, %s quid. My bank app is judging me."
                     % (it2, n2))
            parts = [(a, n1, p), (b, n2, p)]
            blocks = [[a, Turn(o, rng.choice(GOOD_REACT))], [b, Turn(o, "Ha, treat yourself.")]]
            qtext = "How much did %s spend on the %s and the %s together?" % (p, it1, it2)
            answer = "%d quid (%s + %s)" % (int(n1) + int(n2), n1, n2)
        elif typ == "survey":
            v1, v2 = g.pick_value(AREAS), g.pick_value(SURVEY)
            a = Turn(p, "We put in an offer on a flat in %s! Fingers crossed." % v1)
            b = Turn(p, "The survey on the flat came back: %s. So now we renegotiate, or walk."
                     % v2)
            parts = [(a, v1, p), (b, v2, p)]
            blocks = [[a, Turn(o, "Ooh exciting, good luck!")],
                      [b, Turn(o, rng.choice(BAD_REACT))]]
            qtext = ("What did the survey find on the flat %s made an offer on, and where is "
                     "that flat?" % p)
            answer = "%s; %s" % (v2, v1)
        else:
            pool = PEAKS if typ == "peaks" else DISHES
            vs = [g.pick_value(pool) for _ in range(3)]
            if typ == "peaks":
                tpl = ["Summited %s this morning, the wind nearly took my hat.",
                       "Up %s today with a flask and a cheese sandwich, perfect.",
                       "I made it up %s today. My legs are filing a complaint."]
                qtext = "Which hills has %s climbed?" % p
            else:
                tpl = ["Supper club tonight: I'm doing %s for eight people, wish me luck.",
                       "Hosting the supper club again, and %s is on the menu.",
                       "For my supper club I served %s tonight and there were no leftovers."]
                qtext = "Which dishes has %s served at the supper club?" % p
            parts, blocks = [], []
            for n, v in enumerate(vs):
                t = Turn(p, tpl[n] % v)
                parts.append((t, v, p))
                blocks.append([t, Turn(o, rng.choice(GOOD_REACT))])
            answer = ", ".join(vs)
        chosen = []
        for bi, blk in enumerate(blocks):
            lo = chosen[-1] + 1 if chosen else rng.randrange(0, n_sessions // 2)
            hi = n_sessions - (len(blocks) - bi) + 1
            span = rng.randint(3, 9)
            near = list(range(lo, min(hi, lo + span)))
            sess = place(blk, person=p, allowed=near, buy=(typ == "spend"),
                         extra=[o] if typ == "recommend" else ())
            chosen.append(sess)
        for t, v, who in parts:
            f = Fact(who, v)
            f.turns = [t]
            g.facts.append(f)
        ask("multi_hop", qtext, [x[0] for x in parts], answer)

    # -- single-fact categories ------------------------------------------------------------
    def rev_ok(p, k):
        return bool(rev_replies(k, p))

    for cat, n in [("paraphrase", Q["paraphrase"]), ("speaker", Q["speaker"]),
                   ("single_hop", Q["single_hop"]), ("adjacent", Q["adjacent"]),
                   ("temporal", Q["when"])]:
        for i in range(n):
            if cat == "adjacent" and i % 3 == 2:
                p, k = take_slot(rev_ok)
                f, t = plant(p, k, "rev")
                ask(cat, AFTER_Q.replace("{S}", k["subj"]).replace("{X}", p), [t], f.value)
                continue
            p, k = take_slot()
            if cat == "paraphrase":
                f, t = plant(p, k, "para")
                ask(cat, k["pq"].replace("{P}", p), [t], f.value)
            elif cat == "speaker":
                f, t = plant(p, k, "first")
                ask(cat, k["q"].replace("{P}", p), [t], f.value)
            elif cat == "single_hop":
                f, t = plant(p, k, "third")
                ask(cat, k["q"].replace("{P}", p), [t], f.value)
            elif cat == "adjacent":
                f, t = plant(p, k, "ask")
                ask(cat, k["q"].replace("{P}", p), [t], f.value)
            else:
                f, t = plant(p, k, rng.choice(["first", "third"]))
                ask(cat, k["when"].replace("{P}", p), [t], None)

    # -- distractors: other people's similar facts, mentions, unanswered questions ----------
    asked = [(f.person, f.kind) for f in g.facts if f.kind is not None]
    for p, k in list(slots)[: plan["distractors"]]:
        # only kinds someone else is asked about make useful distractors
        v = g.value_for(k)
        block, t = fact_block(p, k, rng.choice(["first", "third", "ask"]), v)
        f = Fact(p, v, k)
        f.turns = [t]
        g.facts.append(f)
        place(block, person=p, buy=k["buy"])
    for p, k in asked:
        if rng.random() < 0.55:
            s = rng.choice(MENTION).replace("{X}", p).replace("{S}", k["subj"])
            o = rng.choice(g.others(p))
            blk = [Turn(o, s[0].upper() + s[1:])]
            if rng.random() < 0.5:
                blk.append(Turn(p, rng.choice(VAGUE)))
            place(blk)

    # ---- lay out sessions ------------------------------------------------------------------
    turns = []
    for s in range(n_sessions):
        blocks = sessions[s]
        rng.shuffle(blocks)
        body_len = sum(len(b) for b in blocks)
        target = rng.randint(max(14, body_len + 4), max(40, body_len + 6))
        target = min(target, 40)
        seq = []
        opener = rng.choice(cast)
        seq.append(Turn(opener, rng.choice(GREETINGS)))
        seq.append(Turn(rng.choice(g.others(opener)), rng.choice(REPLY_GREET)))
        free = target - body_len - 3
        gaps = [0] * (len(blocks) + 1)
        for _ in range(max(0, free)):
            gaps[rng.randrange(len(gaps))] += 1
        last = seq[-1].speaker
        for bi in range(len(blocks) + 1):
            left = gaps[bi]
            while left > 0:
                if left >= 3 and rng.random() < 0.35:
                    th = rng.choice(THREADS)[:left]
                    who = rng.choice([c for c in cast if c != last])
                    for line in th:
                        seq.append(Turn(who, line))
                        who = rng.choice([c for c in cast if c != who])
                    left -= len(th)
                    last = seq[-1].speaker
                    continue
                t = small_talk(rng, g, last)
                seq.append(t)
                last = t.speaker
                left -= 1
            if bi < len(blocks):
                seq.extend(blocks[bi])
                last = blocks[bi][-1].speaker
        bye = Turn(rng.choice(cast), rng.choice(GOODBYES))
        seq.append(bye)
        hour = rng.randint(8, 19)
        t0 = dt.datetime(days[s].year, days[s].month, days[s].day, hour, rng.randint(0, 59))
        for t in seq:
            t.session, t.time = s, t0
            t0 = t0 + dt.timedelta(minutes=rng.randint(1, 5), seconds=rng.randint(0, 59))
        turns.extend(seq)
    for i, t in enumerate(turns):
        t.index = i
    return g, turns, days


def small_talk(rng, g, last):
    speaker = rng.choice([c for c in g.cast if c != last])
    r = rng.random()
    if r < 0.22:
        return Turn(speaker, rng.choice(SHORT) + rng.choice(["", ".", "!", " :)"]))
    if r < 0.30:
        x = rng.choice([c for c in g.cast if c != speaker])
        return Turn(speaker, rng.choice(UNANSWERED).replace("{X}", x))
    n = rng.choice([1, 2, 2, 3, 3, 3, 4])
    parts = rng.sample(SENTENCES, n)
    if rng.random() < 0.25:
        parts.append(rng.choice(TAILS))
    text = " ".join(parts)
    while len(text) >= 280:
        parts = parts[:-1]
        text = " ".join(parts)
    return Turn(speaker, text)


# ---------------------------------------------------------------------------------------------
# Verification
# ---------------------------------------------------------------------------------------------

def verify(convs, questions):
    errs = []
    E = errs.append
    if len(NAMES) < 30 or set(NAMES) & set(BANNED_NAMES) or len(set(NAMES)) != len(NAMES):
        E("name pool")
    if len(K) < 25:
        E("fewer than 25 fact kinds")
    total_q = len(questions)
    if not 500 <= total_q <= 700:
        E("question count %d" % total_q)
    para = sum(1 for q in questions if q["category"] == "paraphrase")
    if not 0.15 <= para / total_q <= 0.20:
        E("paraphrase share %.3f" % (para / total_q))
    for name, (g, turns, days) in convs.items():
        if not 500 <= len(turns) <= 900:
            E("%s: %d turns" % (name, len(turns)))
        per_sess = {}
        for t in turns:
            per_sess.setdefault(t.session, []).append(t)
            if not t.text.strip() or len(t.text) >= 280:
                E("%s: turn %d length" % (name, t.index))
            if not (2021 <= t.time.year <= 2024):
                E("%s: turn %d year" % (name, t.index))
        prev_day = None
        for s in sorted(per_sess):
            ts = per_sess[s]
            if not 10 <= len(ts) <= 40:
                E("%s: session %d has %d turns" % (name, s, len(ts)))
            if len({t.time.date() for t in ts}) != 1:
                E("%s: session %d spans days" % (name, s))
            for a, b in zip(ts, ts[1:]):
                if not 60 <= (b.time - a.time).total_seconds() <= 360:
                    E("%s: turn gap at %d" % (name, b.index))
            d = ts[0].time.date()
            if prev_day and not 2 <= (d - prev_day).days <= 45:
                E("%s: session gap before %d" % (name, s))
            prev_day = d
        # values: whole-word, only in their answer turns; no shared words between values
        seen_words = {}
        for f in g.facts:
            allowed = {t.index for t in f.turns}
            for t in turns:
                if has_phrase(t.text, f.value) and t.index not in allowed:
                    E("%s: value %r also in turn %d" % (name, f.value, t.index))
            for t in f.turns:
                if not has_phrase(t.text, f.value):
                    E("%s: value %r missing from its turn %d" % (name, f.value, t.index))
            for w in content(f.value):
                if w in seen_words and seen_words[w] != f.value:
                    E("%s: values %r and %r overlap" % (name, f.value, seen_words[w]))
                seen_words[w] = f.value
        bday_turns = [t for t in turns if "birthday" in tokens(t.text)]
        bday_people = [b for b, _ in g.bdays]
        if len(bday_turns) != len(g.bdays) or len(set(bday_people)) != len(bday_people):
            E("%s: birthday turns" % name)
        fact_of = {}
        for f in g.facts:
            for t in f.turns:
                fact_of[t.index] = f
        for q in (q for q in questions if q["conversation"] == name):
            cat, text, idx = q["category"], q["question"], q["answer_turns"]
            ats = [turns[i] for i in idx]
            facts = [fact_of.get(i) for i in idx]
            where = "%s: %s question %r" % (name, cat, text)
            if cat in ("single_hop", "speaker", "paraphrase", "adjacent") and \
                    (len(idx) != 1 or facts[0] is None):
                E(where + ": needs one fact turn")
                continue
            if cat == "single_hop":
                f, t = facts[0], ats[0]
                if t.speaker == f.person or f.person.lower() not in tokens(t.text):
                    E(where + ": not told by someone else naming the person")
                if f.person not in text:
                    E(where + ": question does not name the person")
            elif cat in ("speaker", "paraphrase"):
                f, t = facts[0], ats[0]
                if t.speaker != f.person or f.person.lower() in tokens(t.text) or \
                        not (FIRST_PERSON & set(tokens(t.text))):
                    E(where + ": not first person by the person")
                if cat == "paraphrase" and content(text) & content(t.text):
                    E(where + ": shares %r" % sorted(content(text) & content(t.text)))
            elif cat == "adjacent":
                f, t = facts[0], ats[0]
                qc = content(text)
                if qc & content(t.text):
                    E(where + ": answer shares %r" % sorted(qc & content(t.text)))
                nb = [turns[t.index - 1]] if t.index > 0 else []
                nb += [turns[t.index + 1]] if t.index + 1 < len(turns) else []
                if not any(qc <= content(n.text) and n.speaker != t.speaker for n in nb):
                    E(where + ": no neighbouring turn holds the question's words")
                if t.speaker != f.person or f.person.lower() in tokens(t.text):
                    E(where + ": reply not by the person")
            elif cat == "multi_hop":
                if not 2 <= len(idx) <= 3 or None in facts:
                    E(where + ": needs 2-3 fact turns")
                elif len({t.session for t in ats}) != len(ats):
                    E(where + ": answer turns not in different sessions")
            elif cat == "temporal":
                for t in ats:
                    if TIME_WORDS.search(t.text):
                        E(where + ": date words in answer turn %d" % t.index)
                if text.startswith("When did") or text.startswith("When was"):
                    if len(idx) != 1 or facts[0] is None:
                        E(where + ": needs one fact turn")
                    elif q["answer"] != fmt_date(ats[0].time):
                        E(where + ": answer is not the turn's date")
                elif " buy in " in text:
                    f, t = facts[0], ats[0]
                    m = re.search(r" buy in (\w+) (\d{4})", text)
                    if (MONTHS[t.time.month - 1], t.time.year) != (m.group(1), int(m.group(2))):
                        E(where + ": answer turn not in that month")
                    same = [x for x in g.facts if x.person == f.person and x is not f
                            and any(tt.time.year == t.time.year and tt.time.month ==
                                    t.time.month for tt in x.turns)
                            and ((x.kind and x.kind["buy"]) or x.kind is None and
                                 x.value.isdigit())]
                    if same:
                        E(where + ": other purchase by the person that month")
                elif "birthday" in text:
                    ev, bt = ats
                    gap = (bt.time.date() - ev.time.date()).days
                    want = 7 if "a week before" in text else 14
                    if gap != want or "birthday" not in tokens(bt.text):
                        E(where + ": birthday gap %d" % gap)
                    f = facts[0]
                    others = [x for x in g.facts if x.person == f.person and x is not f and
                              any(tt.time.date() == ev.time.date() for tt in x.turns)]
                    if others or f.person not in text:
                        E(where + ": event not unique that day")
                else:
                    E(where + ": unknown temporal form")
            else:
                E(where + ": unknown category")
    return errs


# ---------------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------------

README = """# recall-heldout: the HELD-OUT recall split (frozen)

This directory is the held-out evaluation split for `somna eval recall` (format: docs/recall.md).
It is generated by `scripts/recall_heldout.py` (Python standard library only, fixed seed) and is
frozen: regenerate it only to check it (`python3 scripts/recall_heldout.py --check` compares the
files byte for byte).

**Never tune on it.** Retrieval is tuned on `datasets/recall/`; this split exists to measure
whether that tuning generalises. Do not read its conversations or questions while working on
retrieval, do not copy its content into tests, and report only aggregate numbers from it.

It is built by a different method from `datasets/recall/` (its own names, fact kinds, values and
phrasings; two- and three-person chats with story arcs over months). {counts}
"""


def generate():
    rng = random.Random(SEED)
    names = NAMES[:]
    rng.shuffle(names)
    convs = {}
    questions = []
    sizes = [3, 2, 3, 3, 2, 3, 3, 2]
    for ci in range(8):
        name = "h%02d" % (ci + 1)
        n = sizes[ci]
        cast = [names.pop() for _ in range(n)]
        if n == 3:
            quota = dict(birthday=2, month=3, multi_hop=11, paraphrase=14, speaker=13,
                         single_hop=14, adjacent=14, when=9)
            plan = dict(sessions=rng.randint(24, 27), quota=quota, distractors=16)
        else:
            quota = dict(birthday=2, month=2, multi_hop=9, paraphrase=11, speaker=10,
                         single_hop=11, adjacent=11, when=8)
            plan = dict(sessions=rng.randint(21, 24), quota=quota, distractors=5)
        g, turns, days = build_conversation(rng, name, cast, plan)
        convs[name] = (g, turns, days)
        qs = []
        for cat, text, ats, answer in g.questions:
            if answer is None:
                answer = fmt_date(ats[0].time)
            qs.append(dict(conversation=name, question=text,
                           answer_turns=[t.index for t in ats], category=cat, answer=answer))
        rng.shuffle(qs)
        questions.extend(qs)
    return convs, questions


def render(convs, questions):
    files = {}
    for name, (g, turns, days) in convs.items():
        lines = []
        for t in turns:
            lines.append(json.dumps(dict(
                role="assistant" if t.speaker == g.cast[0] else "user", name=t.speaker,
                content=t.text, created_at=t.time.strftime("%Y-%m-%dT%H:%M:%SZ")),
                ensure_ascii=False, separators=(",", ":")))
        files["conversations/%s.jsonl" % name] = "\n".join(lines) + "\n"
    files["questions.jsonl"] = "".join(
        json.dumps(q, ensure_ascii=False, separators=(",", ":")) + "\n" for q in questions)
    cats = {}
    for q in questions:
        cats[q["category"]] = cats.get(q["category"], 0) + 1
    nturns = sum(len(t) for _, t, _ in convs.values())
    counts = "%d conversations, %d turns, %d questions (%s)." % (
        len(convs), nturns, len(questions),
        ", ".join("%s %d" % (c, cats[c]) for c in sorted(cats)))
    files["README.md"] = README.format(counts=counts)
    return files


def write(out, files):
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(os.path.join(out, "conversations"))
    for rel in sorted(files):
        with open(os.path.join(out, rel), "w", encoding="utf-8", newline="\n") as fh:
            fh.write(files[rel])


def build():
    convs, questions = generate()
    errs = verify(convs, questions)
    if errs:
        for e in errs[:60]:
            print("error:", e, file=sys.stderr)
        print("%d problem(s); nothing written" % len(errs), file=sys.stderr)
        sys.exit(1)
    return render(convs, questions)


def listing(d):
    out = []
    for root, _, fs in os.walk(d):
        for f in fs:
            out.append(os.path.relpath(os.path.join(root, f), d))
    return sorted(out)


def main(argv):
    if argv and argv[0] == "--check":
        files = build()
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "recall-heldout")
            write(out, files)
            a, b = listing(out), listing(DEFAULT_OUT) if os.path.isdir(DEFAULT_OUT) else []
            bad = [] if a == b else ["file lists differ"]
            for rel in a:
                if rel in b and not filecmp.cmp(os.path.join(out, rel),
                                                os.path.join(DEFAULT_OUT, rel), shallow=False):
                    bad.append(rel)
            if bad:
                print("recall-heldout differs from the generator: %s" % ", ".join(bad),
                      file=sys.stderr)
                sys.exit(1)
        print("datasets/recall-heldout matches the generator byte for byte")
        return
    out = argv[0] if argv else DEFAULT_OUT
    files = build()
    write(out, files)
    print("wrote %s (%d files)" % (out, len(files)))


if __name__ == "__main__":
    main(sys.argv[1:])
