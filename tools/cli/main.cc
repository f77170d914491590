#include "commands.h"

int main(int argc, char** argv) { return cumulus::cli::main(argc, argv); }
