"""Known prose in three languages (a few hundred words each) for the documents tests: language, text, search.

Each text has a sentence no other text has (``UNIQUE``), for a search that
must find exactly that page.
"""

from __future__ import annotations

ENGLISH = """
The old lighthouse on the northern cape has guided fishing boats home for more than two hundred years.
Its keeper used to climb one hundred and twelve steps every evening to light the lamp, and every morning
he climbed them again to clean the soot from the glass. Today the light is electric and switches itself on
when the sun goes down, but the village still remembers the families who lived in the small white house at
the foot of the tower. In winter the wind comes from the sea with such force that the windows rattle for
days, and the children of the village are told stories about ships that were saved by a single beam of
light in the fog. Visitors who walk along the cliff path in summer can see seals resting on the rocks below,
and on a clear day the mountains across the bay appear so close that it seems possible to reach them by
rowing for an hour. The museum in the harbour keeps the logbooks of the keepers, written in careful
handwriting, where each storm, each wreck and each rescue was recorded with the time and the direction of
the wind. Reading them, one understands how much patience and courage the work demanded, and how lonely
the long nights must have been. The council has decided to repair the roof of the keeper's house and to
open it as a small library where people can read about the history of the coast, the birds that nest on
the cliffs and the boats that are still built by hand in the yard near the church. Volunteers from the
village will guide visitors on weekends, and the school will organise a festival every autumn.
The purple kettle whistles beside the sleeping harbour cat.
"""

GERMAN = """
Die kleine Bäckerei am Marktplatz öffnet jeden Morgen um fünf Uhr, lange bevor die ersten Busse durch die
Straßen fahren. Der Bäcker und seine Tochter beginnen schon in der Nacht mit der Arbeit, denn der Teig für
das Roggenbrot muss viele Stunden ruhen, bevor er in den großen Ofen geschoben werden kann. Wenn die Sonne
aufgeht, riecht die ganze Gasse nach frischen Brötchen, und vor der Tür warten bereits die Nachbarn, die auf
dem Weg zur Arbeit noch schnell etwas kaufen möchten. Die Familie führt das Geschäft seit vier Generationen,
und die Rezepte werden nicht aufgeschrieben, sondern von den Eltern an die Kinder weitergegeben. Im Herbst
gibt es einen Kuchen mit Zwetschgen aus dem eigenen Garten, im Winter Lebkuchen und Stollen, und im Frühling
kommen die Leute von weit her, um die süßen Hefezöpfe zu probieren, die nur zu Ostern gebacken werden. Der
Bürgermeister hat der Bäckerei im letzten Jahr einen Preis verliehen, weil sie jungen Menschen aus der
Gegend eine Ausbildung ermöglicht und weil sie übrig gebliebenes Brot am Abend an die Tafel verschenkt.
Trotzdem ist die Arbeit nicht leicht geworden: Die Preise für Mehl und Strom sind gestiegen, und viele
Kunden kaufen inzwischen im Supermarkt am Stadtrand ein. Die Tochter möchte das Geschäft dennoch
übernehmen, denn sie liebt die ruhigen Stunden in der Backstube, wenn die Stadt noch schläft und nur das
Summen der Maschinen zu hören ist. Sie plant, am Wochenende Kurse anzubieten, in denen Kinder lernen, wie
man aus Mehl, Wasser, Salz und Zeit ein gutes Brot macht, und sie hofft, dass die Nachbarn ihr treu bleiben.
Der gelbe Regenschirm tanzt fröhlich über dem stillen Brunnen.
"""

FRENCH = """
Le petit train de montagne part de la gare du village chaque matin à huit heures et monte lentement vers le
col, en traversant des forêts de sapins, des prairies fleuries et des ponts de pierre construits il y a plus
d'un siècle. Les voyageurs s'installent près des fenêtres pour regarder les vaches qui paissent sur les
pentes et les cascades qui tombent des rochers après les pluies du printemps. Le conducteur connaît chaque
virage de la ligne et salue les bergers qui travaillent dans les alpages pendant l'été. Au sommet, une
auberge en bois accueille les randonneurs avec une soupe chaude, du fromage de la vallée et une tarte aux
myrtilles préparée par la patronne, qui tient la maison depuis trente ans. En hiver, la neige recouvre les
rails et une machine spéciale doit dégager la voie avant le premier départ, mais le train continue de
circuler presque tous les jours, car il est le seul lien entre les hameaux isolés et la ville. Les enfants
le prennent pour aller à l'école, les médecins pour rendre visite aux malades et les facteurs pour porter le
courrier. La commune a longtemps hésité à moderniser la ligne, parce que les travaux coûtent cher et que les
habitants tiennent beaucoup à l'aspect ancien des wagons. Finalement, elle a décidé de remplacer les moteurs
tout en gardant les banquettes en bois et les lampes en laiton. Les touristes viennent maintenant de loin
pour faire ce voyage, et les guides racontent l'histoire des ouvriers qui ont creusé les tunnels à la main,
dans le froid et le bruit, pendant de longues années de travail difficile et dangereux.
La bicyclette orange chante doucement sous la lune d'argent.
"""

UNIQUE = {
    "en": "The purple kettle whistles beside the sleeping harbour cat",
    "de": "Der gelbe Regenschirm tanzt fröhlich über dem stillen Brunnen",
    "fr": "La bicyclette orange chante doucement sous la lune d'argent",
}
TEXTS = {"en": ENGLISH, "de": GERMAN, "fr": FRENCH}


def page(language: str, *, title: str, extra_head: str = "", nav_links: int = 8) -> str:
    """An HTML page: navigation and footer boilerplate around the ``language`` text as paragraphs."""
    paragraphs = "".join(f"<p>{line.strip()}</p>" for line in TEXTS[language].strip().split(". ") if line.strip())
    nav = "".join(f'<li><a href="/nav/{i}">Menu item {i}</a></li>' for i in range(nav_links))
    return (
        f'<!DOCTYPE html><html lang="{language}"><head><meta charset="utf-8"><title>{title}</title>'
        f'<meta name="description" content="{title} description">{extra_head}</head>'
        f"<body><header><nav><ul>{nav}</ul></nav></header>"
        f"<main><article><h1>{title}</h1>{paragraphs}</article></main>"
        f"<footer><p>Copyright footer boilerplate, all rights reserved.</p></footer></body></html>"
    )
