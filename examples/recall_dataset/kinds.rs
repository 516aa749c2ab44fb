// The phrase bank of the recall dataset generator: fact kinds, timed events, multi-session facts
// and small talk. Included by `generate.rs` (`include!`), so the generator stays one module that
// a test can compile too.
//
// Placeholders: {P} the person the fact is about, {V} the value, {N} another speaker, {R} a
// relative's name, {REL} the relation ("sister"). Every template is checked by the generator:
// paraphrase questions share no content word with their answer turns, adjacent answers share none
// with their question, speaker answers never name their speaker, values appear only in the turns
// that answer.

/// One kind of personal fact with a value ("the puppy's name is Biscuit").
struct Kind {
    key: &'static str,
    /// Possible values; `check` is the part searched for to prove the value appears nowhere else.
    values: &'static [&'static str],
    /// Questions that share the subject's words (single_hop, adjacent, speaker).
    ask: &'static [&'static str],
    /// Someone else states it, naming {P} (single_hop).
    plain: &'static [&'static str],
    /// {P} states it in the first person, without their own name (speaker).
    first: &'static [&'static str],
    /// Someone asks {P} about it: the subject and the name, never the value (adjacent, and a
    /// distractor elsewhere).
    prompt: &'static [&'static str],
    /// {P}'s reply right after a prompt: the value, none of the question's words.
    reply: &'static [&'static str],
    /// {P} says it first, unprompted (reverse adjacent); none of the question's words.
    lead: &'static [&'static str],
    /// The next turn after a lead: someone names {P} and the subject.
    follow: &'static [&'static str],
    /// Questions that share no content word with `para`.
    para_ask: &'static [&'static str],
    /// {P} states it with other words than `para_ask`.
    para: &'static [&'static str],
    /// Turns on the subject that answer nothing.
    noise: &'static [&'static str],
}

const KINDS: &[Kind] = &[
    Kind {
        key: "puppy",
        values: &["Biscuit", "Pepper", "Mochi", "Waffles", "Pickle", "Noodle", "Ziggy", "Clementine", "Bramble", "Tofu"],
        ask: &[
            "What is the name of {P}'s new puppy?",
            "What did {P} name the puppy from the shelter?",
            "What's the puppy {P} adopted called?",
        ],
        plain: &[
            "{P}'s puppy is called {V}, and apparently he already rules the house.",
            "Saw {P} at the park with the new puppy, {V}. So fluffy!",
            "{P} adopted a puppy from the shelter last weekend and named him {V}.",
        ],
        first: &[
            "We finally adopted a puppy from the shelter, his name is {V}!",
            "Our new puppy {V} chewed through a shoe on day one.",
            "The puppy from the shelter is settling in, {V} sleeps on my feet every night.",
        ],
        prompt: &[
            "{P}, what did you end up naming the puppy?",
            "Wait {P}, did the puppy get a name yet?",
            "{P}! How's the new puppy? Tell me you picked a name.",
        ],
        reply: &[
            "We went with {V}!",
            "{V}. The kids voted and I lost.",
            "It's {V}, after a very long family debate.",
        ],
        lead: &[
            "{V} finally learned to sit today, I'm so proud.",
            "{V} stole a whole sandwich off the counter this morning.",
        ],
        follow: &[
            "Ha, sounds like a proper puppy, {P}!",
            "Puppies are chaos. Good luck {P}!",
        ],
        para_ask: &["What name did {P} give the new dog?", "How is {P}'s new dog called?"],
        para: &[
            "The little rescue furball answers to {V} now, mostly when treats are involved.",
            "{V} got his first vaccinations today and was very brave about it.",
        ],
        noise: &[
            "My neighbour's puppy barks at every leaf that moves.",
            "The shelter on Maple Street is running an adoption day again.",
            "Puppies are so much work, I don't know how people do it.",
        ],
    },
    Kind {
        key: "city",
        values: &["Lisbon", "Tallinn", "Montreal", "Valencia", "Krakow", "Ljubljana", "Edinburgh", "Bergen", "Leipzig", "Trieste"],
        ask: &[
            "Which city did {P} move to?",
            "Where did {P} move for the new apartment?",
            "What city is {P} moving to?",
        ],
        plain: &[
            "{P} is moving to {V} next month, the whole apartment is in boxes.",
            "Heard {P} finally found an apartment in {V}, what a move.",
            "{P} moved to {V}, we should all visit the city.",
        ],
        first: &[
            "The move is happening: I signed the lease on an apartment in {V}!",
            "Moving to {V} was the best decision, the city is gorgeous.",
        ],
        prompt: &[
            "{P}, so where are you moving in the end?",
            "{P}, did you decide on the city for the move?",
        ],
        reply: &[
            "{V}! Lease starts on the first.",
            "Looks like {V}. I'm nervous and excited.",
            "{V}, if the paperwork goes through.",
        ],
        lead: &[
            "Finally unpacked the last boxes in our {V} flat.",
            "First night in {V} and the neighbours already brought soup.",
        ],
        follow: &[
            "So the move actually happened, {P}! Congrats.",
            "A new city, {P}, wow. How are you feeling about the move?",
        ],
        para_ask: &["Which city did {P} relocate to?", "What town is {P} living in since relocating?"],
        para: &[
            "Finally unpacked the last boxes in our {V} flat.",
            "The trams here in {V} are so much nicer than back home.",
        ],
        noise: &[
            "Moving is the worst, I never want to pack a box again.",
            "Rent in this city is getting ridiculous.",
            "My cousin wants to move abroad but keeps changing her mind.",
        ],
    },
    Kind {
        key: "job",
        values: &["a paramedic", "a sommelier", "an urban planner", "a pastry chef", "a park ranger", "a sign language interpreter", "a court stenographer", "an air traffic controller", "a tattoo artist", "a marine biologist"],
        ask: &[
            "What job did {P} get?",
            "What is {P}'s new job?",
            "What does {P} do for work now?",
        ],
        plain: &[
            "{P} got the job! {P} is officially {V} now.",
            "Did you all hear {P} started working as {V}? New job, new life.",
            "{P}'s new job as {V} sounds intense.",
        ],
        first: &[
            "First week at the new job as {V} done, I'm exhausted.",
            "Got the job offer, I'm going to work as {V}!",
        ],
        prompt: &[
            "{P}, how did the job interview go?",
            "{P}! Any news about that job you applied for?",
        ],
        reply: &[
            "They said yes! You're looking at {V}.",
            "I start Monday as {V}, still in shock.",
        ],
        lead: &[
            "You are now talking to {V}, officially.",
            "Signed the contract today: {V}, starting next month.",
        ],
        follow: &[
            "Wait, {P}, that's the job you interviewed for? Amazing!",
            "New job, {P}! We need to celebrate.",
        ],
        para_ask: &["What is {P}'s current occupation?", "Which profession did {P} take up?"],
        para: &[
            "Signed the contract today: {V}, starting next month.",
            "Officially {V} as of this morning, uniform and everything.",
        ],
        noise: &[
            "Work has been brutal this week, so many meetings.",
            "My boss wants everyone back in the office on Fridays now.",
            "Job hunting is soul-destroying, honestly.",
        ],
    },
    Kind {
        key: "instrument",
        values: &["cello", "banjo", "trombone", "harp", "accordion", "ukulele", "oboe", "mandolin", "bagpipes", "saxophone"],
        ask: &[
            "What instrument is {P} learning?",
            "Which instrument has {P} been practising?",
            "What is {P} learning to play?",
        ],
        plain: &[
            "{P} has been learning the {V}, the neighbours are thrilled.",
            "{P} played the {V} for us at the barbecue, not bad at all for someone still learning!",
        ],
        first: &[
            "I've been learning the {V} since spring and my fingers hurt.",
            "Practising the {V} every evening now, my teacher says I'm improving.",
        ],
        prompt: &[
            "{P}, how are the music lessons going?",
            "{P}, are you still taking lessons? What was it again?",
        ],
        reply: &[
            "Slowly! The {V} is harder than it looks.",
            "The {V} and I are not friends yet.",
        ],
        lead: &[
            "My {V} teacher made me do scales for an hour today.",
            "Bought a second-hand {V} online, it arrived in one piece!",
        ],
        follow: &[
            "Music lessons, {P}? Respect.",
            "{P}, you'll have to play something for us soon.",
        ],
        para_ask: &["Which instrument is {P} studying?", "What does {P} practise?"],
        para: &[
            "My {V} teacher made me do scales for an hour today.",
            "Bought a second-hand {V} online, it arrived in one piece!",
        ],
        noise: &[
            "There's a jazz night at the bar on Thursday if anyone's up for it.",
            "My kid wants music lessons and I'm trying to stall.",
            "I played the recorder in school and that was the end of my music career.",
        ],
    },
    Kind {
        key: "language",
        values: &["Portuguese", "Korean", "Swahili", "Icelandic", "Turkish", "Welsh", "Tagalog", "Hungarian", "Greek", "Finnish"],
        ask: &[
            "Which language is {P} learning?",
            "What language has {P} been studying?",
        ],
        plain: &[
            "{P} is learning {V} on the bus every morning, such dedication to a language.",
            "{P} ordered dinner in {V} last night, the language lessons are paying off.",
        ],
        first: &[
            "I'm learning {V} with an app, my streak is at 60 days.",
            "Language class tonight, {V} grammar is melting my brain.",
        ],
        prompt: &[
            "{P}, how's the language class going?",
            "{P}, still doing the language app every day?",
        ],
        reply: &[
            "{V} verbs will be the end of me.",
            "I can order coffee in {V} now, so that's something.",
        ],
        lead: &["Had my first full conversation in {V} today, ten whole minutes!"],
        follow: &[
            "{P}, look at you, practically fluent in a new language!",
            "Languages are so hard, {P}, well done.",
        ],
        para_ask: &["Which tongue is {P} picking up?"],
        para: &[
            "Had my first full conversation in {V} today, ten whole minutes!",
            "{V} verbs will be the end of me.",
        ],
        noise: &[
            "Languages never stuck for me, I gave up on French in school.",
            "Anyone know a good app for learning vocabulary?",
        ],
    },
    Kind {
        key: "car",
        values: &["a Volvo wagon", "a Subaru", "a red Mini", "an old Jeep", "a Skoda estate", "a Mazda hatchback", "a Fiat Panda", "a used Tesla", "a Kia Niro", "a Peugeot van"],
        ask: &[
            "What car did {P} buy?",
            "Which car did {P} end up getting?",
        ],
        plain: &[
            "{P} bought {V}, I saw the car outside the bakery.",
            "{P} drove us home in {V}, the new car smell is real.",
        ],
        first: &[
            "Bought a car today: {V}! Bye bye, bus pass.",
            "The new car is {V}, and I already scratched it.",
        ],
        prompt: &[
            "{P}, did you finally pick a car?",
            "{P}, how was the test drive? Which car?",
        ],
        reply: &[
            "Went with {V}. Picking it up Friday.",
            "{V}! Used, but it runs like a dream.",
        ],
        lead: &["Just parked {V} in my driveway and I keep staring out the window at it."],
        follow: &[
            "A car, {P}? Fancy!",
            "{P}, road trip in the new car when?",
        ],
        para_ask: &["Which vehicle did {P} purchase?"],
        para: &[
            "Just parked {V} in my driveway and I keep staring out the window at it.",
            "{V}! Used, but it runs like a dream.",
        ],
        noise: &[
            "Traffic on the ring road was a nightmare this morning.",
            "Cars are so expensive right now, it's absurd.",
        ],
    },
    Kind {
        key: "volunteer",
        values: &["the animal sanctuary", "the food bank", "the soup kitchen", "the literacy program", "the hospice", "the community garden", "the refugee centre", "the children's hospital", "the wildlife rescue", "the repair cafe"],
        ask: &[
            "Where does {P} volunteer?",
            "Where has {P} been volunteering on weekends?",
        ],
        plain: &[
            "{P} volunteers at {V} every Saturday morning.",
            "{P} has been volunteering at {V}, such a good soul.",
        ],
        first: &[
            "Volunteering at {V} again this weekend, it keeps me grounded.",
            "My volunteer shift at {V} ran long today.",
        ],
        prompt: &[
            "{P}, what do you do on Saturday mornings? You're never around.",
            "{P}, are you still doing the volunteer thing?",
        ],
        reply: &[
            "Mostly helping out at {V}, it's lovely.",
            "{V}! They always need extra hands.",
        ],
        lead: &["Spent the morning at {V} again, my feet hurt but it was worth it."],
        follow: &[
            "That's so nice of you to volunteer, {P}.",
            "{P}, how do you find the time to volunteer?",
        ],
        para_ask: &["Which charity does {P} give time to?"],
        para: &["Spent the morning at {V} again, my feet hurt but it was worth it."],
        noise: &[
            "Our office does a charity run every year, I always forget to sign up.",
            "I keep meaning to volunteer somewhere but never do.",
        ],
    },
    Kind {
        key: "class",
        values: &["pottery", "welding", "improv", "bookbinding", "glassblowing", "calligraphy", "woodworking", "salsa", "figure drawing", "beekeeping"],
        ask: &[
            "What class did {P} sign up for?",
            "Which evening course is {P} taking?",
        ],
        plain: &[
            "{P} signed up for a {V} class at the community college.",
            "{P} is taking an evening {V} course and loving it.",
        ],
        first: &[
            "Signed up for a {V} class, first session is Tuesday.",
            "My {V} course is the highlight of my week.",
        ],
        prompt: &[
            "{P}, what's the evening class you mentioned?",
            "{P}, how was your first class? What was it, again?",
        ],
        reply: &[
            "{V}! I'm hopeless at it so far.",
            "It was {V}, and honestly the best two hours of my week.",
        ],
        lead: &["Tonight's {V} session was chaos, I loved it."],
        follow: &[
            "An evening class, {P}? I'm jealous.",
            "{P}, you're so good at trying new classes.",
        ],
        para_ask: &["What hobby workshop does {P} attend?"],
        para: &["Tonight's {V} session was chaos, I loved it."],
        noise: &[
            "The community college sent me a brochure with about a hundred classes.",
            "I should take a class of some kind, I'm getting rusty.",
        ],
    },
    Kind {
        key: "allergy",
        values: &["shellfish", "peanuts", "sesame", "kiwi", "bee stings", "cashews", "mustard", "mango", "celery", "hazelnuts"],
        ask: &[
            "What is {P} allergic to?",
            "What allergy does {P} have?",
        ],
        plain: &[
            "Careful with dinner, {P} is allergic to {V}.",
            "{P} found out the hard way about the {V} allergy.",
        ],
        first: &[
            "Doctor confirmed it: I'm allergic to {V}.",
            "Reminder that I have a {V} allergy before anyone orders.",
        ],
        prompt: &[
            "{P}, anything you can't eat? I'm planning the menu.",
            "{P}, wasn't there something you're allergic to?",
        ],
        reply: &[
            "Just no {V}, please, unless you want an ambulance.",
            "{V}. Learned that one the hard way.",
        ],
        lead: &["Note for the menu: absolutely no {V} near my plate."],
        follow: &[
            "Good to know about the allergy, {P}!",
            "{P}, noted, I'll check every label for allergens.",
        ],
        para_ask: &["Which substance makes {P} sick?"],
        para: &["Note for the menu: absolutely no {V} near my plate."],
        noise: &[
            "Pollen season is wrecking me, my eyes won't stop watering.",
            "Half the office is allergic to something these days.",
        ],
    },
    Kind {
        key: "garden",
        values: &["heirloom tomatoes", "pumpkins", "chili peppers", "sunflowers", "blueberries", "runner beans", "radishes", "raspberries", "sweet potatoes", "cucumbers"],
        ask: &[
            "What is {P} growing in the garden?",
            "What did {P} plant in the garden this year?",
        ],
        plain: &[
            "{P}'s garden is overflowing with {V} this year.",
            "{P} planted {V} all along the garden fence.",
        ],
        first: &[
            "The garden is finally producing, so many {V}!",
            "Planted {V} in the garden this weekend, fingers crossed.",
        ],
        prompt: &[
            "{P}, how's the garden doing?",
            "{P}, did the garden survive the frost?",
        ],
        reply: &[
            "The {V} are thriving, everything else died.",
            "Only the {V} made it, but they're huge.",
        ],
        lead: &["Picked a whole basket of {V} this morning."],
        follow: &[
            "{P}, your garden is putting mine to shame.",
            "Gardening goals, {P}!",
        ],
        para_ask: &["What crop does {P} cultivate in the backyard?"],
        para: &["Picked a whole basket of {V} this morning."],
        noise: &[
            "Slugs ate every single seedling I planted.",
            "My balcony is too shady for a garden, sadly.",
        ],
    },
    Kind {
        key: "bonus",
        values: &["a telescope", "a record player", "an espresso machine", "a kayak", "a sewing machine", "a vintage typewriter", "a pizza oven", "a drone", "a hammock", "a weighted blanket"],
        ask: &[
            "What did {P} buy with the bonus?",
            "What did {P} spend the work bonus on?",
        ],
        plain: &[
            "{P} spent the whole work bonus on {V}.",
            "{P} finally got the bonus and bought {V} with it.",
        ],
        first: &[
            "Spent my bonus on {V} and I regret nothing.",
            "The work bonus went straight into {V}, no regrets.",
        ],
        prompt: &[
            "{P}, did you decide what to do with the bonus money?",
            "{P}, how did you spend the bonus in the end?",
        ],
        reply: &[
            "Already gone! {V}, no regrets.",
            "{V}. Don't judge me.",
        ],
        lead: &["{V} arrived today and it's even better than the photos."],
        follow: &[
            "Treating yourself with the bonus, {P}? Good.",
            "{P}, that bonus was well spent then.",
        ],
        para_ask: &["What purchase did {P} make after getting extra pay?"],
        para: &["{V} arrived today and it's even better than the photos."],
        noise: &[
            "Bonuses at my company are a myth.",
            "I always spend money the second it hits my account.",
        ],
    },
    Kind {
        key: "tattoo",
        values: &["compass", "fox", "lighthouse", "moth", "paper crane", "wave", "pine tree", "whale", "snake", "owl"],
        ask: &[
            "What tattoo did {P} get?",
            "What is {P}'s new tattoo of?",
        ],
        plain: &[
            "{P} got a tattoo of a small {V} on the forearm, it's beautiful.",
            "Did you see {P}'s new tattoo? It's a tiny {V}.",
        ],
        first: &[
            "Got my first tattoo today: a little {V}, on my ankle!",
            "The new tattoo is a small {V}, still healing.",
        ],
        prompt: &[
            "{P}, show us the tattoo!",
            "{P}, you went through with the tattoo? What did you get?",
        ],
        reply: &[
            "It's a small {V}, simple and clean.",
            "A little {V}! The artist did an amazing job.",
        ],
        lead: &["Still can't stop looking at the little {V} on my wrist."],
        follow: &[
            "Ink! {P}, I didn't think you'd do it.",
            "{P}, the tattoo looks great.",
        ],
        para_ask: &["What design did {P} have inked?"],
        para: &["Still can't stop looking at the little {V} on my wrist."],
        noise: &[
            "I want a tattoo but I can't commit to anything forever.",
            "The tattoo place downtown closed, sadly.",
        ],
    },
    Kind {
        key: "paint",
        values: &["sage green", "terracotta", "navy blue", "mustard yellow", "dusty pink", "charcoal grey", "forest green", "burnt orange", "lilac", "teal"],
        ask: &[
            "What colour did {P} paint the living room?",
            "Which colour did {P} choose for the living room walls?",
        ],
        plain: &[
            "{P} painted the living room {V}, it looks so cosy.",
            "{P}'s living room walls are {V} now.",
        ],
        first: &[
            "Painted the living room {V} this weekend, my arms are dead.",
            "We went bold: the living room walls are {V} now.",
        ],
        prompt: &[
            "{P}, did you ever finish repainting?",
            "{P}, how did the painting project turn out?",
        ],
        reply: &[
            "{V}! Two coats and it's perfect.",
            "Went with {V} in the end, love it.",
        ],
        lead: &["Two coats of {V} later and I'm never holding a roller again."],
        follow: &[
            "Painting is such a chore, {P}, well done!",
            "{P}, before and after photos please!",
        ],
        para_ask: &["Which shade are {P}'s lounge surfaces?"],
        para: &["Two coats of {V} later and I'm never holding a roller again."],
        noise: &[
            "Our landlord won't let us paint anything, everything is beige.",
            "Paint samples all look the same to me.",
        ],
    },
    Kind {
        key: "boardgame",
        values: &["Wingspan", "Catan", "Azul", "Pandemic", "Carcassonne", "Ticket to Ride", "Codenames", "Terraforming Mars", "Dixit", "Scythe"],
        ask: &[
            "What board game is {P} obsessed with?",
            "Which board game does {P} keep bringing to game night?",
        ],
        plain: &[
            "{P} made us play {V} for four hours at game night.",
            "{P} is obsessed with {V} right now, every game night.",
        ],
        first: &[
            "I'm bringing {V} to game night, no complaints allowed.",
            "I've played {V} every night this week, I have a board game problem.",
        ],
        prompt: &[
            "{P}, what are we playing on Friday?",
            "{P}, what's the game you keep talking about?",
        ],
        reply: &[
            "{V}, obviously.",
            "{V}! I'll teach everyone the rules.",
        ],
        lead: &["Won {V} three times in a row last night, I'm unstoppable."],
        follow: &[
            "Board games with {P} are so competitive.",
            "{P}, you and your games!",
        ],
        para_ask: &["Which tabletop title does {P} love?"],
        para: &["Won {V} three times in a row last night, I'm unstoppable."],
        noise: &[
            "I lost every single round at the pub quiz, it was humbling.",
            "Board games always end in an argument in my family.",
        ],
    },
    Kind {
        key: "show",
        values: &["Harbour Lights", "The Quiet Shift", "Salt and Iron", "Northbound", "Glass Orchard", "Copper Valley", "Midnight Bakery", "The Last Ferry", "Paper Kingdoms", "Red Meridian"],
        ask: &[
            "What TV show is {P} binge-watching?",
            "Which series has {P} been watching?",
        ],
        plain: &[
            "{P} won't stop talking about {V}, that TV show.",
            "{P} watched all of {V} in one weekend, the whole series.",
        ],
        first: &[
            "I'm three seasons into {V} and I can't stop watching.",
            "Binged {V} this weekend, best show in years.",
        ],
        prompt: &[
            "{P}, what are you watching these days?",
            "{P}, any show recommendations?",
        ],
        reply: &[
            "{V}. Trust me, just start it.",
            "Currently hooked on {V}.",
        ],
        lead: &["The finale of {V} left me staring at the wall."],
        follow: &[
            "{P}, no spoilers please!",
            "You and your shows, {P}.",
        ],
        para_ask: &["Which programme does {P} stream every evening?"],
        para: &["The finale of {V} left me staring at the wall."],
        noise: &[
            "There's nothing good on TV anymore.",
            "I fell asleep ten minutes into the movie again.",
        ],
    },
    Kind {
        key: "sport",
        values: &["rowing", "rock climbing", "fencing", "water polo", "roller derby", "ultimate frisbee", "archery", "kickboxing", "table tennis", "curling"],
        ask: &[
            "Which sport did {P} take up?",
            "What sport is {P} training for now?",
        ],
        plain: &[
            "{P} joined a {V} club, training twice a week.",
            "{P} has gotten seriously into {V}, new favourite sport.",
        ],
        first: &[
            "Joined a {V} club and my whole body hurts from training.",
            "{V} training was brutal tonight, best sport ever.",
        ],
        prompt: &[
            "{P}, you look fit! What's the secret?",
            "{P}, what was the new sport you started?",
        ],
        reply: &[
            "{V}, three times a week!",
            "Honestly? {V}. It's addictive.",
        ],
        lead: &["My {V} coach says I'm ready for my first competition."],
        follow: &[
            "Competition already, {P}? Go you!",
            "{P}, you're so sporty now.",
        ],
        para_ask: &["Which athletic activity has {P} picked up?"],
        para: &["My {V} coach says I'm ready for my first competition."],
        noise: &[
            "I signed up for the gym in January and went twice.",
            "My knees are not built for any sport.",
        ],
    },
    Kind {
        key: "injury",
        values: &["a broken wrist", "a sprained ankle", "a cracked rib", "a torn ligament", "a dislocated shoulder", "a fractured toe", "a pulled hamstring", "a broken collarbone", "a concussion", "a slipped disc"],
        ask: &[
            "What injury did {P} have?",
            "What injury is {P} recovering from?",
        ],
        plain: &[
            "{P} is out of action with {V}, poor thing, nasty injury.",
            "{P} showed up with {V} after the fall, such a bad injury.",
        ],
        first: &[
            "Slipped on the ice and ended up with {V}, worst injury ever.",
            "The doctor says {V} needs six weeks to heal, recovering slowly.",
        ],
        prompt: &[
            "{P}, what happened?! Why the bandage?",
            "{P}, how are you feeling after the accident?",
        ],
        reply: &[
            "{V}. Don't ask.",
            "Turns out it's {V}, so I'm stuck at home.",
        ],
        lead: &["Six weeks with {V}, send snacks."],
        follow: &[
            "Oh no, {P}, an injury like that sounds painful!",
            "{P}, rest up and get better.",
        ],
        para_ask: &["What damage did {P} sustain?"],
        para: &["Six weeks with {V}, send snacks."],
        noise: &[
            "I stubbed my toe on the bed frame for the hundredth time.",
            "Physio appointments are so hard to book.",
        ],
    },
    Kind {
        key: "coffee",
        values: &["an oat flat white", "a cortado", "a matcha latte", "a chai", "an iced americano", "a double espresso", "a mocha", "a cold brew", "a hazelnut latte", "a turmeric latte"],
        ask: &[
            "What coffee does {P} always order?",
            "What is {P}'s usual coffee order?",
        ],
        plain: &[
            "{P} always orders {V}, the barista knows by now.",
            "Got {P} {V} since that's the usual coffee order.",
        ],
        first: &[
            "My coffee order never changes: {V}, every morning.",
            "Grabbed my usual coffee, {V}, on the way in.",
        ],
        prompt: &[
            "{P}, I'm doing a coffee run, what do you want?",
            "{P}, coffee? Your usual?",
        ],
        reply: &[
            "{V}, please! You're a star.",
            "Yes please, {V}.",
        ],
        lead: &["If someone brings me {V} I'll love them forever."],
        follow: &[
            "Coffee run incoming, {P}!",
            "Noted, {P}, I'll grab your coffee.",
        ],
        para_ask: &["Which drink does {P} get at the cafe each day?"],
        para: &["If someone brings me {V} I'll love them forever."],
        noise: &[
            "The coffee machine at work is broken again.",
            "I'm trying to cut down on caffeine, it's going badly.",
        ],
    },
    Kind {
        key: "birthday",
        values: &["a bowling alley", "a rooftop bar", "a karaoke bar", "an escape room", "a roller rink", "a mini golf course", "a boat on the river", "an axe-throwing place", "a jazz club", "a planetarium"],
        ask: &[
            "Where did {P} have the birthday party?",
            "Where is {P} celebrating the birthday?",
        ],
        plain: &[
            "{P}'s birthday party is at {V} on Saturday.",
            "{P} booked {V} for the birthday, it's going to be wild.",
        ],
        first: &[
            "Booked {V} for my birthday party, you're all invited.",
            "My birthday is at {V} this year, bring your A game.",
        ],
        prompt: &[
            "{P}, what's the plan for your birthday?",
            "{P}, are you doing anything for the big birthday?",
        ],
        reply: &[
            "{V}! Saturday at eight.",
            "Thinking {V}, if they have space.",
        ],
        lead: &["Just put down the deposit at {V} for Saturday night, everyone come!"],
        follow: &[
            "Happy early birthday, {P}!",
            "{P}, I'm in for your birthday!",
        ],
        para_ask: &["Which venue did {P} pick for turning another year older?"],
        para: &["Just put down the deposit at {V} for Saturday night, everyone come!"],
        noise: &[
            "Birthdays make me feel ancient.",
            "I still owe my brother a birthday present from March.",
        ],
    },
    Kind {
        key: "restaurant",
        values: &["Casa Lupita", "The Green Fig", "Taverna Nikos", "Pho Saigon", "Little Bombay", "Sakura House", "Osteria Verde", "Blue Lantern", "Chez Marcel", "Bao Bros"],
        ask: &[
            "Which restaurant did {P} recommend?",
            "What restaurant does {P} love?",
        ],
        plain: &[
            "{P} swears by {V}, says it's the best restaurant in town.",
            "{P} took us to {V} and the food was unreal, great restaurant.",
        ],
        first: &[
            "Best restaurant in town is {V}, I will not be taking questions.",
            "Had dinner at {V} again, that restaurant never misses.",
        ],
        prompt: &[
            "{P}, where should I take my parents for dinner?",
            "{P}, what was that restaurant you keep recommending?",
        ],
        reply: &[
            "{V}, get the lamb.",
            "{V}! Book ahead though.",
        ],
        lead: &["Had the best meal of my life at {V} last night."],
        follow: &[
            "{P}, dinner recommendation noted!",
            "Food envy, {P}.",
        ],
        para_ask: &["Where does {P} suggest eating out?"],
        para: &["Had the best meal of my life at {V} last night."],
        noise: &[
            "Every restaurant near the office is either closed or overpriced.",
            "I burned dinner again, cereal it is.",
        ],
    },
    Kind {
        key: "book",
        values: &["The Salt Orchard", "Nine Lanterns", "A Map of Small Hours", "The Glass Cartographer", "Winter at Hollow Fen", "The Clockmaker's Daughter", "River of Ash", "Seven Quiet Rooms", "Tidewater Letters", "Under the Linden Tree"],
        ask: &[
            "What book is {P} reading?",
            "Which book did {P} recommend?",
        ],
        plain: &[
            "{P} lent me {V}, that book is wonderful.",
            "{P} can't put down {V}, says it's the book of the year.",
        ],
        first: &[
            "I'm halfway through {V} and it's the best book I've read in ages.",
            "Finished {V} last night, what a book.",
        ],
        prompt: &[
            "{P}, what are you reading at the moment?",
            "{P}, got any book recommendations?",
        ],
        reply: &[
            "{V}. Cried twice already.",
            "{V}, you'd love it.",
        ],
        lead: &["Stayed up until 2am to finish {V}."],
        follow: &[
            "{P}, lend me that book when you're done!",
            "Reading at 2am, {P}? Classic.",
        ],
        para_ask: &["Which novel has {P} been devouring?"],
        para: &["Stayed up until 2am to finish {V}."],
        noise: &[
            "I bought five books and read none of them.",
            "The library fines are going to ruin me.",
        ],
    },
    Kind {
        key: "phobia",
        values: &["heights", "spiders", "deep water", "clowns", "flying", "needles", "thunderstorms", "elevators", "crowds", "the dark"],
        ask: &[
            "What is {P} afraid of?",
            "What phobia does {P} have?",
        ],
        plain: &[
            "{P} is terrified of {V}, it's a real phobia.",
            "Don't tease {P} about being afraid of {V}.",
        ],
        first: &[
            "I'm genuinely afraid of {V}, always have been.",
            "My phobia of {V} is getting worse, honestly.",
        ],
        prompt: &[
            "{P}, why did you leave so quickly yesterday?",
            "{P}, are you okay? You went pale.",
        ],
        reply: &[
            "It's the {V} thing again, sorry.",
            "{V}. Just... I can't.",
        ],
        lead: &["There's no way I'm going near {V} ever again."],
        follow: &[
            "{P}, that sounds scary, sorry.",
            "Poor {P}, phobias are no joke.",
        ],
        para_ask: &["What frightens {P}?"],
        para: &["There's no way I'm going near {V} ever again."],
        noise: &[
            "Horror movies don't scare me at all, weirdly.",
            "My sister screams at every spider she sees.",
        ],
    },
    Kind {
        key: "holiday",
        values: &["Crete", "Madeira", "Sardinia", "Zanzibar", "Bali", "Mallorca", "Skye", "Tasmania", "Corsica", "the Azores"],
        ask: &[
            "Where did {P} go on holiday?",
            "Where is {P} going for the summer holiday?",
        ],
        plain: &[
            "{P} spent the summer holiday in {V}, look at that tan.",
            "{P} booked a holiday to {V}, lucky thing.",
        ],
        first: &[
            "Booked our summer holiday: two weeks in {V}!",
            "The holiday in {V} was exactly what I needed.",
        ],
        prompt: &[
            "{P}, you're so tanned! Where were you?",
            "{P}, did you book anywhere for the summer?",
        ],
        reply: &[
            "{V}! Ten days of doing nothing.",
            "{V}, finally.",
        ],
        lead: &["Back from {V}, sand still in everything."],
        follow: &[
            "Welcome back, {P}! Holiday photos please.",
            "Jealous of your holiday, {P}.",
        ],
        para_ask: &["Which island did {P} vacation on?"],
        para: &["Back from {V}, sand still in everything."],
        noise: &[
            "I haven't had a proper holiday in two years.",
            "Flights are so expensive this summer.",
        ],
    },
    Kind {
        key: "collection",
        values: &["vinyl records", "fountain pens", "vintage postcards", "succulents", "enamel pins", "old maps", "film cameras", "rare coins", "mechanical keyboards", "teapots"],
        ask: &[
            "What does {P} collect?",
            "What has {P} started collecting?",
        ],
        plain: &[
            "{P} collects {V}, there's a whole shelf of them.",
            "{P} has started collecting {V}, it's getting out of hand.",
        ],
        first: &[
            "Started collecting {V} last year and now they cover a whole wall.",
            "Found two more {V} at the flea market, I collect way too many.",
        ],
        prompt: &[
            "{P}, what was it you collect again?",
            "{P}, did you find anything at the flea market for the collection?",
        ],
        reply: &[
            "More {V}, obviously.",
            "Three {V}! Don't tell anyone at home.",
        ],
        lead: &["I need a bigger shelf for all these {V}."],
        follow: &[
            "{P}, your collection is getting serious.",
            "Flea market haul, {P}? Collecting again?",
        ],
        para_ask: &["What kind of items does {P} hoard?"],
        para: &["I need a bigger shelf for all these {V}."],
        noise: &[
            "My flat is full of stuff I never use.",
            "The flea market on Sunday was mostly junk this time.",
        ],
    },
];

/// A dated event: "When did {P} …?" is answered by the date of the turn that tells it.
struct Event {
    key: &'static str,
    ask: &'static [&'static str],
    /// {P} tells it in the first person, without a date.
    first: &'static [&'static str],
    /// Someone else tells it the same day, naming {P}.
    told: &'static [&'static str],
    good_news: bool,
}

const EVENTS: &[Event] = &[
    Event {
        key: "half_marathon",
        ask: &["When did {P} run the half marathon?", "When did {P} finish a first half marathon?"],
        first: &["Just crossed the finish line of my first half marathon! Legs are jelly."],
        told: &["{P} just finished the half marathon, so proud!"],
        good_news: true,
    },
    Event {
        key: "driving_test",
        ask: &["When did {P} pass the driving test?"],
        first: &["I PASSED MY DRIVING TEST!!! Second attempt, but still."],
        told: &["{P} just passed the driving test, lock up your mailboxes."],
        good_news: true,
    },
    Event {
        key: "keys",
        ask: &["When did {P} get the keys to the new place?"],
        first: &["Got the keys to the new place this morning, it's real!"],
        told: &["{P} just picked up the keys to the new place!"],
        good_news: true,
    },
    Event {
        key: "engaged",
        ask: &["When did {P} get engaged?"],
        first: &["We got engaged!!! I still can't believe it, the ring is perfect."],
        told: &["Huge news, {P} just got engaged!"],
        good_news: true,
    },
    Event {
        key: "surgery",
        ask: &["When did {P} have the knee surgery?", "When was {P}'s knee operation?"],
        first: &["Knee surgery done, I'm home and a bit woozy."],
        told: &["{P}'s knee surgery went well today, resting at home now."],
        good_news: false,
    },
    Event {
        key: "thesis",
        ask: &["When did {P} submit the thesis?"],
        first: &["Thesis submitted. I'm free. I am FREE."],
        told: &["{P} handed in the thesis today, finally!"],
        good_news: true,
    },
    Event {
        key: "skydiving",
        ask: &["When did {P} go skydiving?"],
        first: &["I jumped out of a plane today. Skydiving is insane."],
        told: &["{P} went skydiving today, I watched from the ground and nearly fainted."],
        good_news: true,
    },
    Event {
        key: "promotion",
        ask: &["When did {P} get promoted to team lead?"],
        first: &["Guess who got promoted to team lead this afternoon!"],
        told: &["{P} got the promotion to team lead today!"],
        good_news: true,
    },
    Event {
        key: "graduation",
        ask: &["When did {P} graduate?", "When was {P}'s graduation ceremony?"],
        first: &["Graduation ceremony done, the gown was ridiculous."],
        told: &["Watched {P} graduate this morning, what a day."],
        good_news: true,
    },
    Event {
        key: "open_mic",
        ask: &["When did {P} perform at the open mic?"],
        first: &["Did my first open mic set tonight and people actually laughed."],
        told: &["{P} killed it at the open mic tonight!"],
        good_news: true,
    },
    Event {
        key: "phone",
        ask: &["When did {P} lose the phone on the train?"],
        first: &["Left my phone on the train, it's gone forever. Messaging from the laptop."],
        told: &["{P} lost the phone on the train today, message the laptop instead."],
        good_news: false,
    },
    Event {
        key: "chess",
        ask: &["When did {P} win the chess tournament?"],
        first: &["Won the club chess tournament this evening, still buzzing."],
        told: &["{P} won the chess tournament tonight, undefeated!"],
        good_news: true,
    },
    Event {
        key: "grandma",
        ask: &["When did {P} visit grandma in the hospital?"],
        first: &["Visited Grandma in hospital today, she's in good spirits."],
        told: &["{P} went to see grandma in the hospital today, she's doing okay."],
        good_news: false,
    },
    Event {
        key: "bike",
        ask: &["When was {P}'s bike stolen?"],
        first: &["Someone stole my bike from outside the library. Unbelievable."],
        told: &["{P}'s bike got stolen outside the library today, can you believe it."],
        good_news: false,
    },
    Event {
        key: "concert",
        ask: &["When did {P} see Arctic Monkeys live?"],
        first: &["The Arctic Monkeys concert tonight was unreal, my ears are ringing."],
        told: &["{P} is at the Arctic Monkeys concert right now, so jealous."],
        good_news: true,
    },
    Event {
        key: "citizenship",
        ask: &["When did {P} become a citizen?"],
        first: &["Citizenship ceremony this morning, I'm officially a citizen!"],
        told: &["{P} became a citizen today, the ceremony was lovely."],
        good_news: true,
    },
    Event {
        key: "school",
        ask: &["When did {P}'s daughter start school?"],
        first: &["My daughter's first day of school today, I cried in the car."],
        told: &["{P}'s daughter started school today, big day for the whole family."],
        good_news: true,
    },
    Event {
        key: "flood",
        ask: &["When did {P}'s kitchen flood?"],
        first: &["A pipe burst and the kitchen flooded, everything's soaked."],
        told: &["{P}'s kitchen flooded today after a pipe burst, what a mess."],
        good_news: false,
    },
];

/// Reactions to news (no event words: the news turn alone answers "when").
const GOOD_REACTIONS: &[&str] = &[
    "No way!! Congratulations!",
    "Amazing, so happy for you!",
    "This is the best news all week.",
    "Woohoo! Drinks are on me next time.",
    "Ahh, that's wonderful!",
];
const BAD_REACTIONS: &[&str] = &[
    "Oh no, that's awful. Hang in there.",
    "Ugh, I'm so sorry. Need anything?",
    "That's rough. Let us know if we can help.",
    "Oh no! Sending hugs.",
];

/// Countries for the trips of the multi-hop questions.
const COUNTRIES: &[&str] = &["Japan", "Peru", "Morocco", "Iceland", "Vietnam", "Norway", "Chile", "Kenya", "Mexico", "Jordan", "Canada", "Argentina", "Egypt", "Thailand", "Croatia", "Nepal"];
const TRIP_ASK: &[&str] = &[
    "Which countries did {P} travel to?",
    "What countries has {P} visited on trips?",
    "Where has {P} travelled abroad?",
];
/// A trip, told by {P} (no name) or by someone naming {P}.
const TRIP_FIRST: &[&str] = &[
    "Back from {V}! The food alone was worth the flight.",
    "Landed in {V} this morning, sending pictures soon.",
    "Jet lag from {V} is destroying me, I slept 14 hours.",
    "Packing for {V}, leaving tomorrow at dawn.",
];
const TRIP_TOLD: &[&str] = &[
    "{P}, your photos from {V} are incredible!",
    "{P} is in {V} this week, the pictures look amazing.",
];

/// A relative introduced in one session and whose news comes in a later one.
const RELATIONS: &[&str] = &["sister", "brother", "cousin", "roommate", "neighbour", "best friend"];
const RELATIVES: &[&str] = &["Anika", "Bastian", "Corinne", "Desmond", "Elodie", "Fergus", "Greta", "Hugo", "Isolde", "Jasper", "Kirsten", "Lorenzo", "Maeve", "Nikolai", "Odile", "Pavel", "Quentin", "Rosalind", "Soren", "Thea"];
const RELATIVE_NEWS: &[&str] = &["got into vet school", "opened a bike repair shop", "became a firefighter", "started a food truck", "joined the navy", "became a midwife", "opened a bookshop", "got a job on an oil rig", "started a PhD in astrophysics", "became a ferry captain", "won a baking competition", "moved to Antarctica for research"];
const RELATIVE_INTRO: &[&str] = &[
    "My {REL} {R} is staying with us for a few weeks.",
    "Had lunch with my {REL} {R} today, we hadn't talked in ages.",
    "{R}, my {REL}, is visiting next month.",
    "My {REL} {R} says hi to everyone, by the way.",
];
const RELATIVE_NEWS_FIRST: &[&str] = &[
    "Big news: {R} {V}!",
    "{R} {V}, can you believe it?",
];
const RELATIVE_NEWS_TOLD: &[&str] = &["Bumped into {R} in town, apparently {R} {V}!"];
const RELATIVE_ASK: &[&str] = &[
    "What did {P}'s {REL} do recently?",
    "What's the news about {P}'s {REL}?",
    "What happened with {P}'s {REL}?",
];

/// Small talk: {N} is another speaker's name.
const SMALL_TALK: &[&str] = &[
    "How was the weekend, {N}?",
    "Did anyone end up going to the market on {D}?",
    "What kind of week is everyone having?",
    "Recently I can't fall asleep before midnight.",
    "Did you end up calling the plumber, {N}?",
    "Honestly, what a week.",
    "{N}, did you see the message from the landlord?",
    "Has anyone heard from {N} lately?",
    "How did the thing on {D} go?",
    "I'm so tired, I could sleep for a week.",
    "Did you all see the storm last night?",
    "What did you think of the new {PLACE}?",
    "Lol, {N}, that's exactly what I said.",
    "Same here, honestly.",
    "Haha yes!",
    "Wait, what?",
    "Ok that's hilarious.",
    "How's everyone doing?",
    "Did I miss anything important?",
    "Not much new here, just work and sleep.",
    "I made {FOOD} for dinner and it was actually good.",
    "Anyone want to grab {FOOD} on {D}?",
    "It's been raining for three days straight.",
    "The weather has been lovely, finally.",
    "I need a holiday from my holiday.",
    "{N}, you were right about the {PLACE}, it was packed.",
    "What time are we meeting on {D}?",
    "I'm running late, sorry! Ten minutes.",
    "Did anyone find my umbrella? I think I left it at {N}'s.",
    "Recently everything feels so busy.",
    "How did you get on with the taxes, {N}?",
    "I spent the whole day cleaning, what a thrill.",
    "What kind of snacks should I bring?",
    "Did you hear the noise from the street last night?",
    "The bus was late again, classic.",
    "{N}, how did it go with the dentist?",
    "Does anyone know a good mechanic?",
    "My internet died for the whole evening.",
    "I can't believe it's already {MONTH}.",
    "We should do a picnic soon if the weather holds.",
    "{N} always knows the best places.",
    "Did you end up watching the match on {D}?",
    "I've been meaning to call my parents all week.",
    "Work was fine, nothing exciting.",
    "How are the kids, {N}?",
    "Just got back from the {PLACE}, so many people.",
    "Who's bringing the speaker for {D}?",
    "I'll send the photos from {D} later.",
    "What did you do recently, {N}? Anything fun?",
    "Long day. Very long day.",
    "Ha, {N}, classic you.",
    "Does {D} work for everyone?",
    "I might be a bit late on {D}, dentist.",
    "My phone battery is dying, brb.",
    "The new {PLACE} near the station has good reviews.",
    "Did you see {N}'s message about {D}?",
    "I had {FOOD} three days in a row, no shame.",
    "Honestly I just want to stay in and do nothing.",
    "What kind of music are you into lately, {N}?",
    "The neighbours are renovating again, the drilling never stops.",
    "Can someone remind me what we decided about {D}?",
    "{N}, you still owe me a coffee, just saying.",
    "I finally fixed the wobbly table, small victories.",
    "Anyone else's heating broken? Mine is freezing.",
    "Did anyone else get that weird email from the building manager?",
    "I tried that new recipe from {N}, total disaster.",
    "What are we doing about the group gift for {MONTH}?",
    "Honestly the best part of my day was the sandwich.",
    "I think I'm getting a cold, everyone at work is sneezing.",
    "Ok but did anyone actually read the article I sent?",
    "{N}, how's the flatmate situation?",
    "Is it just me or is everything more expensive this month?",
    "Remind me never to take the early train again.",
    "Anyone have a ladder I could borrow on {D}?",
    "I walked 20,000 steps today without trying, the city is huge.",
    "Did you guys see the video {N} posted? I can't stop laughing.",
    "My plants are dying and I don't know why.",
    "What kind of cake should we get for the office party?",
    "I've been sleeping terribly recently.",
    "{N}, did it work out with the bank?",
    "How do people have time for anything?",
    "Just made the mistake of checking my emails on a {D}.",
    "The queue at the post office was out the door.",
    "Honestly, {N}, I don't know how you do it.",
    "I'll bring {FOOD} if someone else does drinks.",
    "Thinking about cutting my hair short. Thoughts?",
    "Did anyone ever find out what that noise was?",
    "What did we decide about the {PLACE} in the end?",
    "Going to try to go to bed early tonight. We'll see.",
    "How is it already {MONTH}?",
    "Sorry, missed the messages, was in meetings all day.",
    "Did anyone see the fireworks?",
    "It took me an hour to get home today.",
    "We should plan something for {MONTH}.",
    "{N}, are you coming on {D} or not?",
    "Yes! Finally someone agrees with me.",
    "Nope, not me.",
    "I'll think about it.",
    "That sounds like a lot, {N}.",
    "Totally.",
    "Good point, {N}.",
];
const GREETINGS: &[&str] = &[
    "Hey everyone! Long time no chat.",
    "Morning all!",
    "Hi hi, how's everyone?",
    "Evening, folks.",
    "Hello! Is everyone alive?",
    "Happy {D}, everyone!",
];
const GOODBYES: &[&str] = &[
    "Right, I need to go, talk soon!",
    "Off to bed, night all.",
    "Gotta run, catch you later.",
    "Ok, back to work for me. Bye!",
    "Speak soon, everyone!",
];
const DAYS: &[&str] = &["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];
const FOODS: &[&str] = &["lasagne", "tacos", "curry", "dumplings", "pancakes", "soup", "burritos", "falafel", "noodles", "pizza"];
const PLACES: &[&str] = &["bakery", "gym", "cinema", "supermarket", "bar", "library", "park", "bistro"];
const MONTHS: &[&str] = &["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];

/// The speakers of the conversations (never a relative's name, never a value).
const NAMES: &[&str] = &["Priya", "Omar", "Lena", "Tomasz", "Aiko", "Mateo", "Grace", "Kofi", "Ingrid", "Ravi", "Sofia", "Dmitri", "Hannah", "Yusuf", "Chloe", "Bruno", "Nadia", "Felix", "Mei", "Jonas", "Amara", "Lucas", "Zara", "Henrik"];
