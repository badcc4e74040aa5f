"""The built-in English text set: the default input of a text model when no ``text`` file is given.

Plain sentences of varied length and topic, written for condcli (no licence questions), fixed so that
results are reproducible.
"""

from __future__ import annotations

DEFAULT_TEXTS: tuple[str, ...] = (
    "The quick brown fox jumps over the lazy dog.",
    "A transformer maps a sequence of tokens to a sequence of vectors of the same length.",
    "She opened the window, and the smell of rain filled the small kitchen.",
    "Interest rates rose for the third time this year, and the markets fell sharply.",
    "The museum will be closed on Monday for the installation of a new exhibition.",
    "Water boils at one hundred degrees Celsius at sea level.",
    "He forgot his umbrella on the train again.",
    "The committee approved the budget after a long and sometimes heated debate.",
    "Photosynthesis converts light energy into chemical energy stored in sugars.",
    "Our flight was delayed by two hours because of fog at the airport.",
    "Children learn languages faster than adults, according to many studies.",
    "The recipe calls for three eggs, a cup of flour and a pinch of salt.",
    "In the final minute of the match, the goalkeeper made an extraordinary save.",
    "The library offers free courses on programming and data analysis.",
    "A small boat drifted slowly across the calm, grey surface of the lake.",
    "Please remember to back up your files before installing the update.",
    "The old bridge, built in the nineteenth century, is still used every day.",
    "Scientists have discovered a new species of frog in the mountain forests.",
    "If the condition number of a matrix is large, small errors in the input can grow.",
    "My grandmother grows tomatoes, beans and sunflowers in her garden.",
    "The orchestra played the symphony with great energy and precision.",
    "Traffic was heavy this morning, so I took my bicycle instead.",
    "The company announced that it would open a new office in the city centre.",
    "Stars are born in vast clouds of gas and dust.",
    "After dinner we walked along the beach and watched the sun go down.",
    "The software crashed whenever the user tried to save a very large file.",
    "Good teachers ask questions that make their students think.",
    "The train to the coast leaves every hour from platform four.",
    "Heavy snow closed several roads in the north of the country overnight.",
    "Attention lets every token look at every other token in the sequence.",
    "The baker starts work at four in the morning to have bread ready by seven.",
    "Reading a good book on a rainy afternoon is one of life's simple pleasures.",
)
